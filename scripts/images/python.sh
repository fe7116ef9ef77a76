#!/usr/bin/env bash
# sandstream/python:bookworm — the code interpreter's template: Debian's python3, pip, ipykernel,
# numpy, pandas, matplotlib and nodejs (deploy/docker/python.Dockerfile) as one layer on
# sandstream/debian:bookworm. Cached by content: the image carries a label with the hash of its
# Dockerfile and of the base image's id, and is rebuilt only when that changed (a new Debian
# image, an edited Dockerfile), so CI does not pay for the apt install again. FORCE=1 rebuilds.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE="${IMAGE:-sandstream/python:bookworm}"
BASE_IMAGE="${BASE_IMAGE:-sandstream/debian:bookworm}"
DOCKERFILE="$REPO_ROOT/deploy/docker/python.Dockerfile"
image_exists "$BASE_IMAGE" || IMAGE="$BASE_IMAGE" FORCE=0 "$(dirname "${BASH_SOURCE[0]}")/debian-bookworm.sh"

hash="$( { sha256sum <"$DOCKERFILE"; docker image inspect -f '{{.Id}}' "$BASE_IMAGE"; } | sha256sum | cut -c1-64)"
if [ "${FORCE:-0}" != "1" ] && image_exists "$IMAGE" &&
  [ "$(docker image inspect -f '{{index .Config.Labels "sandstream.python.sha256"}}' "$IMAGE")" = "$hash" ]; then
  log "$IMAGE is up to date (FORCE=1 rebuilds it)"
  exit 0
fi

context="$(mktemp -d "${TMPDIR:-/tmp}/sandstream-python.XXXXXX")"
trap 'rm -rf "$context"' EXIT
old="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
log "docker build $IMAGE (apt-get install python3 … nodejs)"
# The legacy builder (no BuildKit front end on this engine); the host's network reaches the mirror.
if ! out="$(DOCKER_BUILDKIT=0 docker build -q --network host --build-arg "BASE_IMAGE=$BASE_IMAGE" \
  --label "sandstream.python.sha256=$hash" -f "$DOCKERFILE" -t "$IMAGE" "$context" 2>&1)"; then
  echo "$out" >&2
  exit 1
fi
# The image this one replaces would stay behind untagged.
if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
  docker image rm "$old" >/dev/null 2>&1 || true
fi
log "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%d MB", $1 / 1e6 }'))"
