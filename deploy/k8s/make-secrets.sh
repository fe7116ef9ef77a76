#!/usr/bin/env bash
# Writes the Secrets' files an overlay's secretGenerator reads, with fresh random passwords:
#   deploy/k8s/make-secrets.sh deploy/k8s/overlays/dev
# into <overlay>/secrets/ (git-ignored, mode 0600). A file that exists is kept, so running it again
# never rotates a password under a running installation; delete the directory to start over.
#   redis-url, redis-users.acl   Secret sandstream-redis: the services' URL (user admin) and Redis's
#                                ACL file, where the `default` user is off (no one logs in as it)
#                                but keeps its permissions: Redis 7 replays the append-only file's
#                                transactions as `default` and drops those it may not run, which
#                                loses every job on restart (docs/reliability.md). An ACL file an
#                                older version wrote (`user default off` alone) is upgraded in place.
#   nats-password, nats-url      Secret sandstream-nats
#   api-admin-key                Secret sandstream-api: the api's first admin key (sk_<id>_<secret>)
set -euo pipefail
overlay="${1:?usage: make-secrets.sh <overlay directory>}"
[ -f "$overlay/kustomization.yaml" ] || { echo "make-secrets: $overlay has no kustomization.yaml" >&2; exit 1; }
dir="$overlay/secrets"
mkdir -p "$dir"
chmod 0700 "$dir"
umask 077

# hex: safe in URLs and ACL lines without quoting.
random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
# base64url without padding, the alphabet of an API key's secret part.
random_b64url() { head -c "$1" /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '='; }
# printf without a newline: the generator takes a file's bytes whole, and a URL must not end in one.
write() { [ -e "$dir/$1" ] || printf '%s' "$2" >"$dir/$1"; }

if [ ! -e "$dir/redis-url" ] || [ ! -e "$dir/redis-users.acl" ]; then
  password="$(random_hex 24)"
  rm -f "$dir/redis-url" "$dir/redis-users.acl"
  write redis-url "redis://admin:${password}@redis.sandstream.svc.cluster.local:6379"
  write redis-users.acl "$(printf 'user default off ~* &* +@all\nuser admin on >%s ~* &* +@all\n' "$password")"
fi
if grep -qx 'user default off' "$dir/redis-users.acl"; then
  sed -i 's/^user default off$/user default off ~* \&* +@all/' "$dir/redis-users.acl"
  echo "make-secrets: upgraded $dir/redis-users.acl: \`default\` keeps its permissions (apply the overlay, restart Redis)"
fi
if [ ! -e "$dir/nats-password" ] || [ ! -e "$dir/nats-url" ]; then
  password="$(random_hex 24)"
  rm -f "$dir/nats-password" "$dir/nats-url"
  write nats-password "$password"
  write nats-url "nats://sandstream:${password}@nats.sandstream.svc.cluster.local:4222"
fi
write api-admin-key "sk_$(random_hex 8)_$(random_b64url 32)"
echo "make-secrets: $dir holds the Secrets' files (kept out of git)"
