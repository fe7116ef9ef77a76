# sandstream/python — the code interpreter's template (docs/code-interpreter.md): Debian's own
# python3 with pip, ipykernel, numpy, pandas and matplotlib, and nodejs for JavaScript contexts,
# on the locally made Debian image (no registry can be reached here). Built by
# scripts/images/python.sh with the host's network for apt (the image's sources are the mirror
# debootstrap used). --no-install-recommends and no apt lists or .debs left: a lean layer.
# python3-munkres: matplotlib's python3-fonttools needs `python3-scipy | python3-munkres`; naming
# the small one keeps scipy, pythran, boost's headers and gcc (about 600 MB) out of the image.
ARG BASE_IMAGE=sandstream/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-pip python3-ipykernel python3-numpy python3-pandas python3-matplotlib python3-munkres \
      nodejs >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && find /usr/lib/python3 -name __pycache__ -prune -exec rm -rf {} + \
 && python3 -c 'import matplotlib.pyplot, pandas, numpy' \
 && node -e 'process.exit(0)'
# The kernels render figures in memory (there is no display).
ENV MPLBACKEND=Agg
CMD ["/bin/bash"]
