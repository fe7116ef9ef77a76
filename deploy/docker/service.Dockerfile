# sandstream/services — one image for every service (api, scheduler, pod-lifecycle,
# step-dispatcher, reaper); the container's command picks the service:
#   docker run sandstream/services:dev node services/scheduler/dist/main.js
#
# No base image can be pulled here, so it is built on the locally made Debian image with the
# project's own Node runtime copied in, from a context scripts/images/services.sh stages:
#   node            the Node binary the project builds and tests with (glibc only, no libnode)
#   app/            package.json, package-lock.json, each workspace's package.json and built
#                   dist/, and node_modules installed with --omit=dev
# Build it with that script (`npm run images:stack`), not by hand.
ARG BASE_IMAGE=sandstream/debian:bookworm
FROM ${BASE_IMAGE}
# iptables for pod-lifecycle's egress rules (docker-compose.yml runs it as root with NET_ADMIN on
# the host's network; the other services never call it). First, so code changes reuse the layer.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY node /usr/local/bin/node
# Non-root: the services only talk to Redis, NATS, the collector and (pod-lifecycle, reaper)
# the Docker socket, whose group the operator grants with `group_add` (docker-compose.yml);
# compose runs pod-lifecycle alone as root, for the firewall.
RUN useradd --uid 1000 --user-group --no-create-home --home-dir /app --shell /usr/sbin/nologin sandstream
ENV NODE_ENV=production
WORKDIR /app
COPY app/ /app/
USER 1000:1000
# Prometheus scrape endpoint when SANDSTREAM_METRICS_PORT=9464.
EXPOSE 9464
CMD ["node", "services/scheduler/dist/main.js"]
