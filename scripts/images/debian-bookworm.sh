#!/usr/bin/env bash
# sandstream/debian:bookworm — a minimal Debian (debootstrap --variant=minbase) plus the few tools
# a person or an agent reaches for first in a shell (git, curl, ps/top, less, vi), imported into
# the local engine, because no registry can be reached from here.
#
# Cached by content: one digest over the suite, the variant and the package list names both the
# rootfs tarball in .cache/images/ and the image (label sandstream.image.sha256). An image built
# from the same inputs is kept (a rerun costs one `docker image inspect`); a changed package list
# builds a new rootfs and re-imports; a cached tarball re-imports in seconds after `docker rmi`.
# FORCE=1 re-imports, FORCE_ROOTFS=1 runs debootstrap again.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE="${IMAGE:-sandstream/debian:bookworm}"
SUITE=bookworm
VARIANT=minbase
# Without Recommends (debootstrap never installs them): git without its perl helpers' extras,
# curl without the CA bundle's Recommends. ca-certificates is named so https works out of the box.
PACKAGES=(ca-certificates curl git less procps vim-tiny)
LABEL=sandstream.image.sha256

sha="$(printf '%s\n' "$SUITE" "$VARIANT" "${PACKAGES[@]}" | sha256sum | cut -d' ' -f1)"
if [ "${FORCE:-0}" != "1" ] && image_exists "$IMAGE"; then
  built_from="$(docker image inspect --format "{{ index .Config.Labels \"$LABEL\" }}" "$IMAGE")"
  if [ "$built_from" = "$sha" ]; then
    log "$IMAGE is up to date with its package list (FORCE=1 rebuilds it)"
    exit 0
  fi
  log "$IMAGE was built from another package list; rebuilding"
fi

tarball="$IMAGE_CACHE/debian-$SUITE-$VARIANT-${sha:0:12}.tar"
if [ ! -s "$tarball" ] || [ "${FORCE_ROOTFS:-0}" = "1" ]; then
  mirror="$(debian_mirror)"
  rootfs="$(mktemp -d "${TMPDIR:-/tmp}/sandstream-bookworm.XXXXXX")"
  trap 'as_root rm -rf "$rootfs" "$rootfs.log"' EXIT
  log "debootstrap --variant=$VARIANT --include=$(IFS=,; echo "${PACKAGES[*]}") $SUITE (from apt's configured mirror)"
  as_root debootstrap --variant="$VARIANT" --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    "$SUITE" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2
    exit 1
  }
  # Package caches and lists are dead weight until someone runs apt-get update inside; manuals
  # and translations are too in a sandbox nobody reads man pages in (kept: copyright files).
  as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
  mkdir -p "$IMAGE_CACHE"
  # Tarballs of other package lists are stale once this one exists.
  find "$IMAGE_CACHE" -maxdepth 1 -name "debian-$SUITE-*.tar" ! -name "$(basename "$tarball")" -delete
  as_root tar --numeric-owner -C "$rootfs" -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
fi

log "docker import $IMAGE"
docker import --change 'CMD ["/bin/bash"]' --change "LABEL $LABEL=$sha" "$tarball" "$IMAGE" >/dev/null
log "built $IMAGE"
