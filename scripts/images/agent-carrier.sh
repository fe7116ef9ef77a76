#!/usr/bin/env bash
# sandstream/agent-carrier:dev — the agent's single executable and runtime libraries in an image
# FROM scratch, whose default command injects them into /shared. Needs `npm run build` first.
#
# Unlike the base images this one goes stale whenever the agent changes, so besides FORCE=1 it is
# rebuilt when the binary or anything in its runtime/lib (the loader, libraries, the native
# spawner) differs from what the image was built from (label sandstream.agent.sha256).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE="${IMAGE:-sandstream/agent-carrier:dev}"
AGENT_BINARY="${AGENT_BINARY:-$REPO_ROOT/agent/dist/sandstream-agent}"
AGENT_RUNTIME_LIB="${AGENT_RUNTIME_LIB:-$(dirname "$AGENT_BINARY")/runtime/lib}"
DOCKERFILE="$REPO_ROOT/deploy/docker/agent-carrier.Dockerfile"

if [ ! -x "$AGENT_BINARY" ] || [ ! -f "$AGENT_RUNTIME_LIB/ld-linux-x86-64.so.2" ]; then
  echo "agent-carrier: $AGENT_BINARY or its runtime/lib is missing; run 'npm run build' first" >&2
  exit 1
fi

# One digest over the executable and every runtime file, by name and content.
sha="$(
  {
    (cd "$(dirname "$AGENT_BINARY")" && sha256sum "$(basename "$AGENT_BINARY")")
    (cd "$AGENT_RUNTIME_LIB" && sha256sum -- *)
  } | sha256sum | cut -d' ' -f1
)"
if [ "${FORCE:-0}" != "1" ] && image_exists "$IMAGE"; then
  built_from="$(docker image inspect --format '{{ index .Config.Labels "sandstream.agent.sha256" }}' "$IMAGE")"
  if [ "$built_from" = "$sha" ]; then
    log "$IMAGE is up to date with $(basename "$AGENT_BINARY") (FORCE=1 rebuilds it)"
    exit 0
  fi
  log "$IMAGE was built from other agent files; rebuilding"
fi

# A minimal build context: sending agent/dist (tsc output, SEA work files) would be wasted I/O.
context="$(mktemp -d "${TMPDIR:-/tmp}/sandstream-carrier.XXXXXX")"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/lib"
cp "$AGENT_BINARY" "$context/sandstream-agent"
cp "$AGENT_RUNTIME_LIB"/* "$context/lib/"
chmod 0755 "$context/sandstream-agent" "$context/lib"/*

log "docker build $IMAGE"
# The legacy builder: the engine here has no BuildKit front end and FROM scratch needs nothing more.
# Its deprecation notice is noise; the output is shown only when the build fails.
if ! out="$(DOCKER_BUILDKIT=0 docker build -q -f "$DOCKERFILE" --label "sandstream.agent.sha256=$sha" -t "$IMAGE" "$context" 2>&1)"; then
  echo "$out" >&2
  exit 1
fi
log "built $IMAGE"
