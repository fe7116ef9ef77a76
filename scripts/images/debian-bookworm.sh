#!/usr/bin/env bash
# sandstream/debian:bookworm — a minimal Debian (debootstrap --variant=minbase) imported into the
# local engine, because no registry can be reached from here. The rootfs tarball is cached, so a
# rebuild after `docker rmi` takes seconds; FORCE=1 rebuilds the image, FORCE_ROOTFS=1 the rootfs.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE="${IMAGE:-sandstream/debian:bookworm}"
needs_build "$IMAGE" || exit 0

tarball="$IMAGE_CACHE/debian-bookworm-minbase.tar"
if [ ! -s "$tarball" ] || [ "${FORCE_ROOTFS:-0}" = "1" ]; then
  mirror="$(debian_mirror)"
  rootfs="$(mktemp -d "${TMPDIR:-/tmp}/sandstream-bookworm.XXXXXX")"
  trap 'as_root rm -rf "$rootfs"' EXIT
  log "debootstrap --variant=minbase bookworm (from apt's configured mirror)"
  as_root debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2
    exit 1
  }
  rm -f "$rootfs.log"
  # Package caches and lists are dead weight in an image nobody will apt-get inside.
  as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  mkdir -p "$IMAGE_CACHE"
  as_root tar --numeric-owner -C "$rootfs" -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
fi

log "docker import $IMAGE"
docker import --change 'CMD ["/bin/bash"]' "$tarball" "$IMAGE" >/dev/null
log "built $IMAGE"
