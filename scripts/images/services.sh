#!/usr/bin/env bash
# sandstream/services:dev — every service's built dist/ with its production dependencies and the
# host's Node runtime, on sandstream/debian:bookworm (deploy/docker/service.Dockerfile). Needs
# `npm run build` first. Like the carrier it goes stale with the code, so besides FORCE=1 it is
# rebuilt when the staged files differ from what the image was built from (label
# sandstream.services.sha256).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE="${IMAGE:-sandstream/services:dev}"
BASE_IMAGE="${BASE_IMAGE:-sandstream/debian:bookworm}"
NODE_BINARY="${NODE_BINARY:-$(command -v node)}"
image_exists "$BASE_IMAGE" || IMAGE="$BASE_IMAGE" FORCE=0 "$(dirname "${BASH_SOURCE[0]}")/debian-bookworm.sh"

cd "$REPO_ROOT"
for dir in libs/*/ services/*/; do
  if [ ! -d "$dir/dist" ]; then
    echo "services image: $dir has no dist/; run 'npm run build' first" >&2
    exit 1
  fi
done
if [ ! -f console/dist/index.html ]; then
  echo "services image: console/dist is missing; run 'npm run build' first" >&2
  exit 1
fi
if [ ! -f agent/dist/sandstream-agent.cjs ]; then
  echo "services image: agent/dist/sandstream-agent.cjs is missing; run 'npm run build' first" >&2
  exit 1
fi

context="$(mktemp -d "${TMPDIR:-/tmp}/sandstream-services.XXXXXX")"
trap 'rm -rf "$context"' EXIT
app="$context/app"
mkdir -p "$app"
# Every workspace's manifest (npm ci wants them all), but built code only for libs and services:
# the agent reaches Docker sandboxes through its carrier image; its bundle stays for the
# in-process backend. The web console is its static files (the api serves them; its packages are
# bundled into them, so none is installed). Source maps, build info and tests are left out.
tar -cf - package.json package-lock.json libs/*/package.json services/*/package.json \
  agent/package.json console/package.json test/package.json | tar -C "$app" -xf -
tar -cf - --exclude='*.map' --exclude='*.tsbuildinfo' --exclude='*.test.*' --exclude='testing' \
  --exclude='libs/test-support/dist' libs/*/dist services/*/dist console/dist agent/dist/sandstream-agent.cjs |
  tar -C "$app" -xf -
# The Lua scripts are read at run time from their source directories (lua-loader.ts).
find libs services -path '*/node_modules' -prune -o -path '*/src/lua/*' -name '*.lua' -print |
  tar -cf - -T - | tar -C "$app" -xf -
cp "$NODE_BINARY" "$context/node"
# In the digest too: an edited Dockerfile rebuilds the image.
cp "$REPO_ROOT/deploy/docker/service.Dockerfile" "$context/Dockerfile"

# One digest over everything staged but node_modules, which the lock file already pins.
sha="$( (cd "$context" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)"
if [ "${FORCE:-0}" != "1" ] && image_exists "$IMAGE"; then
  built_from="$(docker image inspect --format '{{ index .Config.Labels "sandstream.services.sha256" }}' "$IMAGE")"
  if [ "$built_from" = "$sha" ]; then
    log "$IMAGE is up to date with the build (FORCE=1 rebuilds it)"
    exit 0
  fi
fi

# The image this build replaces, removed afterwards: one left behind per code change adds up.
previous="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"

log "npm ci --omit=dev (staged workspaces)"
# From npm's cache when it holds the packages (it does after the repository's own npm ci).
(cd "$app" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null)
log "docker build $IMAGE"
# The host's network for apt (iptables; a cached layer after the first build).
if ! out="$(DOCKER_BUILDKIT=0 docker build -q --network host --build-arg "BASE_IMAGE=$BASE_IMAGE" \
  --label "sandstream.services.sha256=$sha" \
  -f "$context/Dockerfile" -t "$IMAGE" "$context" 2>&1)"; then
  echo "$out" >&2
  exit 1
fi
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect --format '{{.Id}}' "$IMAGE")" ]; then
  # Still used by a container (a stack that is up): it stays, and that is fine.
  docker image rm "$previous" >/dev/null 2>&1 || true
fi
log "built $IMAGE"
