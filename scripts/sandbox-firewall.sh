#!/usr/bin/env bash
# The host firewall half of Docker sandbox isolation (docs/sandbox-backends.md, "Reach").
# A sandbox on a bridge reaches the host through the bridge's gateway address, and traffic to the
# host's own addresses goes through the INPUT chain, which Docker leaves open. Sandstream's own
# services bind loopback by default; this closes every other host port to the bridge except
# Redis's, for services on the host that listen on all interfaces.
#
#   sudo scripts/sandbox-firewall.sh add|remove [bridge-interface] [redis-port]
#
# Defaults: sandstream0 (the interface of the network the Docker backend creates) and 6379.
# Idempotent: `add` skips rules already there, `remove` deletes only what `add` made.
set -euo pipefail

action=${1:-}
bridge=${2:-sandstream0}
port=${3:-6379}
if [[ $action != add && $action != remove ]] || ! [[ $port =~ ^[0-9]+$ ]]; then
  echo "usage: $0 add|remove [bridge-interface] [redis-port]" >&2
  exit 64
fi
comment="sandstream sandbox reach ${bridge}"
# Listed last to first: each is inserted at the top of INPUT, so the first line ends up first.
rules=(
  "-i ${bridge} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT"
  "-i ${bridge} -p tcp --dport ${port} -j ACCEPT"
  "-i ${bridge} -j REJECT"
)
for ((i = ${#rules[@]} - 1; i >= 0; i--)); do
  read -r -a rule <<<"${rules[i]}"
  if iptables -C INPUT "${rule[@]}" -m comment --comment "$comment" 2>/dev/null; then
    [[ $action == remove ]] && iptables -D INPUT "${rule[@]}" -m comment --comment "$comment"
  else
    [[ $action == add ]] && iptables -I INPUT "${rule[@]}" -m comment --comment "$comment"
  fi
done
exit 0
