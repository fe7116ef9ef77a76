#!/usr/bin/env bash
# sandstream/datastores:bookworm — Redis and NATS installed from Debian's packages into
# sandstream/debian:bookworm (deploy/docker/datastores.Dockerfile); the compose stack runs both
# from it. Builds the Debian image first when it is missing. FORCE=1 rebuilds.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE="${IMAGE:-sandstream/datastores:bookworm}"
BASE_IMAGE="${BASE_IMAGE:-sandstream/debian:bookworm}"
needs_build "$IMAGE" || exit 0
image_exists "$BASE_IMAGE" || IMAGE="$BASE_IMAGE" FORCE=0 "$(dirname "${BASH_SOURCE[0]}")/debian-bookworm.sh"

context="$(mktemp -d "${TMPDIR:-/tmp}/sandstream-datastores.XXXXXX")"
trap 'rm -rf "$context"' EXIT
log "docker build $IMAGE (apt-get install redis-server nats-server)"
# The legacy builder (no BuildKit front end on this engine); the host's network reaches the mirror.
if ! out="$(DOCKER_BUILDKIT=0 docker build -q --network host --build-arg "BASE_IMAGE=$BASE_IMAGE" \
  -f "$REPO_ROOT/deploy/docker/datastores.Dockerfile" -t "$IMAGE" "$context" 2>&1)"; then
  echo "$out" >&2
  exit 1
fi
log "built $IMAGE"
