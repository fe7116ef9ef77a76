#!/usr/bin/env bash
# Builds every local image the tests and the Docker backend use. Each script skips an image
# that already exists unless FORCE=1. Needs a running engine (scripts/ensure-docker.sh) and, for
# the carrier, a built agent (npm run build); CARRIER_IMAGE names the carrier's tag (default
# sandstream/agent-carrier:<hash of the agent files>, agent-carrier.sh).
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$dir/debian-bookworm.sh"
"$dir/busybox-static.sh"
IMAGE="${CARRIER_IMAGE:-}" "$dir/agent-carrier.sh"
"$dir/python.sh"
