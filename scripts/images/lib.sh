#!/usr/bin/env bash
# Helpers shared by the image scripts in this directory. Source it; do not run it.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Root filesystems and downloaded packages are cached here (git-ignored) so reruns are fast.
IMAGE_CACHE="${IMAGE_CACHE:-$REPO_ROOT/.cache/images}"

log() { printf '[images] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

image_exists() {
  docker image inspect "$1" >/dev/null 2>&1
}

# True when the image should be (re)built: it is missing, or FORCE=1 asks for a rebuild.
needs_build() {
  if [ "${FORCE:-0}" = "1" ]; then return 0; fi
  if image_exists "$1"; then
    log "$1 exists (FORCE=1 rebuilds it)"
    return 1
  fi
  return 0
}

# The Debian mirror apt is already configured with on this machine. Reading it from apt's own
# configuration keeps every host name out of the repository. Understands both the deb822
# (*.sources) and the one-line (*.list) formats; the first entry that serves "bookworm" wins.
debian_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri="$(awk '
      /^[[:space:]]*$/ { if (uri != "" && suite) { print uri; exit } uri=""; suite=0; next }
      /^URIs:/ { uri=$2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") suite=1 }
      END { if (uri != "" && suite) print uri }
    ' "$f" | head -n 1)"
    if [ -n "$uri" ]; then echo "$uri"; return 0; fi
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri="$(awk '$1 == "deb" && $0 ~ / bookworm / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f")"
    if [ -n "$uri" ]; then echo "$uri"; return 0; fi
  done
  echo "no apt source for bookworm found in /etc/apt/sources.list*" >&2
  return 1
}
