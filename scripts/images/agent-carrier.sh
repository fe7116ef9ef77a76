#!/usr/bin/env bash
# sandstream/agent-carrier:<hash12> — the agent's single executable and runtime libraries in an
# image FROM scratch, whose default command injects them into /shared. Needs `npm run build` first.
#
# Tagged by content: <hash12> is the start of one digest over the binary and everything in its
# runtime/lib (the loader, libraries, the native spawner), so two checkouts with different agents
# on one engine each get their own carrier instead of rebuilding one shared tag under each other.
# The tag is written to agent/dist/carrier-image (CARRIER_IMAGE_FILE), where the Docker backend and
# the tests read it. IMAGE names another tag instead (then checked by its label
# sandstream.agent.sha256, rebuilt when it differs); FORCE=1 rebuilds either.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

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
IMAGE="${IMAGE:-sandstream/agent-carrier:${sha:0:12}}"
CARRIER_IMAGE_FILE="${CARRIER_IMAGE_FILE:-$(dirname "$AGENT_BINARY")/carrier-image}"
# Where the backend and tests find this checkout's carrier, once it exists (built now or before).
record() { echo "$IMAGE" >"$CARRIER_IMAGE_FILE"; }
if [ "${FORCE:-0}" != "1" ] && image_exists "$IMAGE"; then
  built_from="$(docker image inspect --format '{{ index .Config.Labels "sandstream.agent.sha256" }}' "$IMAGE")"
  if [ "$built_from" = "$sha" ]; then
    log "$IMAGE is up to date with $(basename "$AGENT_BINARY") (FORCE=1 rebuilds it)"
    record
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
record
