#!/usr/bin/env bash
# Make sure a local Docker engine answers `docker info`. Idempotent: does nothing when an engine
# already answers; otherwise starts dockerd in the background with a storage driver that actually
# works on this machine. Installing Debian's docker.io is scripts/system-packages.mjs's job.
#
# Environment:
#   DOCKERD_LOG       where dockerd writes its log      (default /var/log/sandstream-dockerd.log)
#   DOCKER_DATA_ROOT  dockerd --data-root                (default /var/lib/docker)
#   DOCKER_WAIT_SECS  how long to wait for the engine    (default 60)
set -euo pipefail

log() { printf '[ensure-docker] %s\n' "$*" >&2; }

DOCKERD_LOG="${DOCKERD_LOG:-/var/log/sandstream-dockerd.log}"
DOCKER_DATA_ROOT="${DOCKER_DATA_ROOT:-/var/lib/docker}"
DOCKER_WAIT_SECS="${DOCKER_WAIT_SECS:-60}"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if docker info >/dev/null 2>&1; then
  log "engine already answers ($(docker info --format '{{.ServerVersion}} {{.Driver}}' 2>/dev/null))"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  log "dockerd is not installed (Debian package docker.io)"
  exit 1
fi

# Choose a storage driver by trying it, not by guessing from the kernel version: inside a nested
# sandbox the data root may itself sit on overlayfs, where overlay2 cannot stack.
pick_storage_driver() {
  as_root mkdir -p "$DOCKER_DATA_ROOT"
  local probe
  probe="$(as_root mktemp -d "$DOCKER_DATA_ROOT/.overlay-probe.XXXXXX")"
  as_root mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
  if as_root mount -t overlay overlay \
    -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
    as_root umount "$probe/merged"
    as_root rm -rf "$probe"
    echo overlay2
    return
  fi
  as_root rm -rf "$probe"
  if command -v fuse-overlayfs >/dev/null 2>&1 && [ -c /dev/fuse ]; then
    echo fuse-overlayfs
    return
  fi
  echo vfs
}

# A previous engine may still be starting (another engineer or an earlier run): wait for it
# rather than starting a second daemon on the same socket.
if ! pgrep -x dockerd >/dev/null 2>&1; then
  driver="$(pick_storage_driver)"
  log "starting dockerd (storage driver $driver, log $DOCKERD_LOG)"
  as_root touch "$DOCKERD_LOG"
  # setsid + nohup: the daemon must outlive this script and the CI shell that ran it.
  as_root setsid nohup dockerd --storage-driver "$driver" --data-root "$DOCKER_DATA_ROOT" \
    >>"$DOCKERD_LOG" 2>&1 </dev/null &
else
  log "dockerd is running but not answering yet; waiting"
fi

for _ in $(seq 1 "$DOCKER_WAIT_SECS"); do
  if docker info >/dev/null 2>&1; then
    log "engine ready ($(docker info --format '{{.ServerVersion}} {{.Driver}}' 2>/dev/null))"
    exit 0
  fi
  sleep 1
done

log "engine did not answer within ${DOCKER_WAIT_SECS}s; last lines of $DOCKERD_LOG:"
tail -n 30 "$DOCKERD_LOG" >&2 || true
exit 1
