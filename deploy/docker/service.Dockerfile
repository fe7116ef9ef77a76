# sandstream/services — one image for the four services (scheduler, pod-lifecycle,
# step-dispatcher, reaper); the container's command picks the service:
#   docker run sandstream/services node services/scheduler/dist/main.js
#
# It needs a Node 20 base image (NODE_IMAGE). On a machine that cannot reach a registry, no base
# can be pulled: `docker load` one first, or build elsewhere. docker-compose.yml passes
# SANDSTREAM_NODE_IMAGE through. Build context: the repository root;
# service.Dockerfile.dockerignore keeps host node_modules and dist/ out (they are rebuilt inside).
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# The whole tree, not manifest by manifest: `npm ci` needs every workspace's package.json, and
# a list here would silently go stale whenever a library is added.
COPY . .
RUN npm ci --ignore-scripts --no-audit --no-fund
# Project references pull in the libraries each service uses.
RUN npx tsc -b services/scheduler services/pod-lifecycle services/step-dispatcher services/reaper services/api \
 && npm prune --omit=dev --ignore-scripts

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/libs ./libs
COPY --from=build /app/services ./services
# Non-root: the services only talk to Redis, NATS, the collector and (pod-lifecycle, reaper)
# the Docker socket, whose group the operator grants with `group_add` where needed.
USER node
# Prometheus scrape endpoint when SANDSTREAM_METRICS_PORT=9464.
EXPOSE 9464
CMD ["node", "services/scheduler/dist/main.js"]
