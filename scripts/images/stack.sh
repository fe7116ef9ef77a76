#!/usr/bin/env bash
# The images docker-compose.yml runs, besides those build-all.sh makes: Redis and NATS from
# Debian's packages, and the services with the project's Node. Needs `npm run build` and a
# running engine. Not part of build-all.sh: the services image follows every code change, so
# test/e2e/compose.test.ts builds it on demand (a no-op when nothing changed).
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$dir/datastores.sh"
"$dir/services.sh"
