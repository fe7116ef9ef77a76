# sandstream/datastores — Redis and NATS from Debian's own packages (redis-server, nats-server) on
# the locally made Debian image, because no registry can be reached here. docker-compose.yml runs
# both services from it; the dev overlay of deploy/k8s too. Built by scripts/images/datastores.sh,
# which gives the build the host's network for apt (the image's sources are the mirror
# debootstrap used).
ARG BASE_IMAGE=sandstream/debian:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server nats-server >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && mkdir -p /data \
 && chown redis:redis /data
# Both run as the redis user (uid from the package): /data above is the volume mount point, whose
# ownership a fresh named volume copies.
USER redis
WORKDIR /data
EXPOSE 6379 4222 8222
CMD ["redis-server", "--dir", "/data"]
