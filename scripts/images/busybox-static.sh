#!/usr/bin/env bash
# sandstream/busybox:static — a root filesystem holding nothing but a statically linked busybox
# and its applet links: no libc, no loader. The agent must run here using only what it brings.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IMAGE="${IMAGE:-sandstream/busybox:static}"
needs_build "$IMAGE" || exit 0

work="$(mktemp -d "${TMPDIR:-/tmp}/sandstream-busybox.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Take busybox from the Debian package rather than the host's /usr/bin, so the image does not
# depend on what happens to be installed; the .deb is cached.
debdir="$IMAGE_CACHE/busybox-static"
mkdir -p "$debdir"
deb="$(ls "$debdir"/busybox-static_*.deb 2>/dev/null | head -n 1 || true)"
if [ -z "$deb" ]; then
  log "apt-get download busybox-static"
  (cd "$debdir" && apt-get download busybox-static >/dev/null 2>&1) || {
    as_root apt-get update -qq
    (cd "$debdir" && apt-get download busybox-static >/dev/null)
  }
  deb="$(ls "$debdir"/busybox-static_*.deb | head -n 1)"
fi
dpkg-deb -x "$deb" "$work/pkg"

rootfs="$work/rootfs"
mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/root" "$rootfs/tmp" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
chmod 1777 "$rootfs/tmp"
install -m 0755 "$work/pkg/bin/busybox" "$rootfs/bin/busybox"
if file "$rootfs/bin/busybox" 2>/dev/null | grep -q 'dynamically linked'; then
  echo "busybox from $deb is not static" >&2
  exit 1
fi
# One link per applet, at the path busybox itself reports (/bin/sh, /usr/bin/env, ...).
for applet in $("$rootfs/bin/busybox" --list-full); do
  [ "$applet" = "bin/busybox" ] && continue
  mkdir -p "$rootfs/$(dirname "$applet")"
  ln -sf /bin/busybox "$rootfs/$applet"
done
# Enough of /etc for tools that look up users (id, ls -l) and for a non-root run.
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"

log "docker import $IMAGE"
tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -c . |
  docker import --change 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null
log "built $IMAGE"
