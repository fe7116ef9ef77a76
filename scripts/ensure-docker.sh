#!/usr/bin/env bash
# Make sure a local Docker engine answers `docker info`. Idempotent: does nothing when an engine
# already answers; otherwise starts dockerd in the background with a storage driver that actually
# works on this machine. Installing Debian's docker.io is scripts/system-packages.mjs's job.
#
# Environment:
#   DOCKERD_LOG       where dockerd writes its log      (default /var/log/sandstream-dockerd.log)
#   DOCKER_DATA_ROOT  dockerd --data-root                (default /var/lib/docker)
#   DOCKER_WAIT_SECS  how long to wait for the engine    (default 60)
#   DOCKER_CONFIG_FILE the engine's daemon.json          (default /etc/docker/daemon.json)
#
# When gVisor's runsc is installed (Debian package runsc), it is registered in daemon.json's
# `runtimes` as `runsc` (root file system shared with the host, so a sandbox's container layer
# can be snapshotted) and `runsc-exclusive` (runsc's default file access: faster file operations,
# snapshots of the work volume only; docs/snapshots.md), so `runtimeClass: gvisor` sandboxes can
# run; an engine already running is reloaded with SIGHUP when that changed daemon.json (runtimes
# reload without a restart, running containers are untouched and keep the flags they started with).
set -euo pipefail

log() { printf '[ensure-docker] %s\n' "$*" >&2; }

DOCKERD_LOG="${DOCKERD_LOG:-/var/log/sandstream-dockerd.log}"
DOCKER_DATA_ROOT="${DOCKER_DATA_ROOT:-/var/lib/docker}"
DOCKER_WAIT_SECS="${DOCKER_WAIT_SECS:-60}"
DOCKER_CONFIG_FILE="${DOCKER_CONFIG_FILE:-/etc/docker/daemon.json}"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

engine_has_runsc() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc-exclusive"'
}

# Adds runsc to daemon.json's runtimes, keeping every other key, and only when it is not there
# with these exact arguments. Prints "changed" when it wrote the file. The ptrace platform needs
# no KVM and no nested-virtualisation support; --network=host keeps the container's own network
# namespace (Docker's bridge or host network) because runsc's own netstack cannot start on every
# host, and the sandbox's network policy is Docker's job anyway. --file-access=shared makes the
# Sentry revalidate the root file system against the host (a snapshot's restore writes there);
# --overlay2=none, where this runsc knows the flag, keeps the root out of the Sentry's own overlay
# (the default of newer releases), whose writes would never reach the host.
register_runsc() {
  command -v runsc >/dev/null 2>&1 || return 0
  local overlay=""
  runsc flags 2>&1 | grep -q -- '-overlay2 ' && overlay="--overlay2=none"
  as_root mkdir -p "$(dirname "$DOCKER_CONFIG_FILE")"
  as_root "$(command -v node)" --input-type=module -e '
    import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
    const [file, path, overlay] = process.argv.slice(1);
    const config = existsSync(file) ? JSON.parse(readFileSync(file, "utf8") || "{}") : {};
    const base = ["--platform=ptrace", "--network=host", ...(overlay ? [overlay] : [])];
    const wanted = {
      runsc: { path, runtimeArgs: [...base, "--file-access=shared"] },
      "runsc-exclusive": { path, runtimeArgs: base },
    };
    const current = { runsc: config.runtimes?.runsc, "runsc-exclusive": config.runtimes?.["runsc-exclusive"] };
    if (JSON.stringify(current) === JSON.stringify(wanted)) process.exit(0);
    config.runtimes = { ...config.runtimes, ...wanted };
    // Written aside then renamed: a half-written daemon.json would stop the next engine start.
    writeFileSync(`${file}.sandstream-tmp`, `${JSON.stringify(config, null, 2)}\n`);
    renameSync(`${file}.sandstream-tmp`, file);
    console.log("changed");
  ' "$DOCKER_CONFIG_FILE" "$(command -v runsc)" "$overlay"
}

# A daemon.json this script cannot read is left as it is: the engine matters more than gVisor.
changed=""
if changed="$(register_runsc)"; then
  [ -n "$changed" ] && log "registered runsc and runsc-exclusive in $DOCKER_CONFIG_FILE"
else
  log "could not add runsc to $DOCKER_CONFIG_FILE (left unchanged); gVisor sandboxes will be refused"
fi

if docker info >/dev/null 2>&1; then
  if command -v runsc >/dev/null 2>&1 && { [ -n "$changed" ] || ! engine_has_runsc; }; then
    pid="$(pgrep -o -x dockerd || true)"
    if [ -n "$pid" ]; then
      log "reloading dockerd ($pid) so it knows the runsc runtime"
      as_root kill -HUP "$pid"
      for _ in $(seq 1 10); do engine_has_runsc && break; sleep 1; done
    fi
    engine_has_runsc || log "the engine still lacks the runsc runtime (see $DOCKERD_LOG); gVisor sandboxes will be refused"
  fi
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
