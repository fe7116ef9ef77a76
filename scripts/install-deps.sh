#!/usr/bin/env bash
# Installs the npm dependencies exactly as package-lock.json pins them.
#
# `npm ci` first. The registry this machine reaches serves only some platforms' builds of a few
# packages' optional native binaries (biome, rollup, turbo for darwin/windows/android …), so npm
# writes a lock file without those entries and `npm ci` then refuses it as "out of sync"
# (npm/cli#9846, #8320). When — and only when — that is the refusal, fall back to
# `npm install` from the same lock, and fail if that changed the lock: exactly the locked versions.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if npm ci --no-audit --no-fund >"$log" 2>&1; then
  # npm's summary only: EBADENGINE warnings are multi-line objects (a package asking for another
  # node than it runs fine on), and cut by tail they left a bare "npm warn EBADENGINE }".
  grep -v -E 'nodedir|install-scripts|EBADENGINE' "$log" | tail -n 3
  exit 0
fi
if grep -q 'Missing: .* from lock file' "$log" && ! grep -v 'from lock file' "$log" | grep -q 'Invalid:'; then
  echo "npm ci refused the lock only for optional platform packages this registry does not serve:"
  grep -o 'Missing: [^ ]*' "$log" | head -n 5 | sed 's/^/  /'
  echo "  … installing the locked versions with npm install instead"
  npm install --no-audit --no-fund 2>&1 | { grep -v -E 'nodedir|install-scripts|EBADENGINE' || true; }
  # npm ci's promise kept: exactly the locked versions, or fail.
  git diff --exit-code --stat -- package-lock.json
  exit 0
fi
cat "$log" >&2
exit 1
