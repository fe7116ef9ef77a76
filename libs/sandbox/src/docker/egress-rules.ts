import { createHash } from 'node:crypto';
import { allowEntries, type Egress } from '@sandstream/wire';
import { NON_PUBLIC_IPV4 } from '../ip-ranges.js';

/**
 * Where a sandbox may connect to, as iptables rules (docs/sandbox-backends.md, "Reach"). One
 * chain per sandbox, entered from DOCKER-USER (forwarded traffic) and INPUT (traffic to the
 * host's own addresses, which DOCKER-USER never sees) for frames from the sandbox's MAC address
 * on its bridge. The MAC is chosen before the container exists, so the rules are in place before
 * its first packet; a sandbox cannot change it (no NET_ADMIN). The chain only ever rejects or
 * returns: what it lets through is decided by the rules after it (Docker's, the operator's).
 */
export interface EgressTarget {
  jobId: string;
  /** The container's MAC address on the sandbox network (set at create). */
  mac: string;
  /** The host interface of the sandbox network (sandstream0, br-<id>). */
  bridge: string;
  /** The sandbox network's IPv4 subnet: other sandboxes, refused whatever the policy says. */
  subnet: string;
  /** The sandbox's one way to Redis, always open. */
  redis?: { address: string; port: number };
  /**
   * The collector the agent sends its step spans to (its OTEL_EXPORTER_OTLP_ENDPOINT), always
   * open like Redis: pod-lifecycle chose it, the step did not (docs/telemetry.md).
   */
  collector?: { address: string; port: number };
  /** Name servers the engine forwards the sandbox's lookups to (the host's resolv.conf). */
  nameservers: string[];
  egress: Egress;
  /** The egress proxy's ports, when the allow-list names domains (egress-proxy.ts). */
  proxy?: { http: number; tls: number };
}

/** Kept importable from here too: the firewall's rules are written from it. */
export { NON_PUBLIC_IPV4 };

const CHAIN_PREFIX = 'SSE-';
const COMMENT_PREFIX = 'sandstream-egress';

/** The sandbox's chain: iptables names are at most 28 characters, job ids up to 128. */
export function egressChain(jobId: string): string {
  return `${CHAIN_PREFIX}${createHash('sha256').update(jobId).digest('hex').slice(0, 20)}`;
}

export function isEgressChain(name: string): boolean {
  return /^SSE-[0-9a-f]{20}$/.test(name);
}

/** The comment on the jumps, naming the job so a sweep can tell an orphan (quotes kept out). */
export function egressComment(jobId: string): string {
  return `${COMMENT_PREFIX} ${jobId.replace(/["\\]/g, '_')}`;
}

/** A locally administered unicast MAC, fresh per sandbox. */
export function randomSandboxMac(bytes: Buffer): string {
  const b = [...bytes.subarray(0, 5)];
  return ['02', ...b.map((x) => x.toString(16).padStart(2, '0'))].join(':');
}

function reject(match: string): string[] {
  // A refused connection fails at once (RST / port unreachable) instead of hanging to a timeout.
  const at = match ? `${match} ` : '';
  return [
    `${at}-p tcp -j REJECT --reject-with tcp-reset`,
    `${at}-j REJECT --reject-with icmp-port-unreachable`,
  ];
}

/** The chain's rules (without `-A <chain>`), in order. */
export function egressChainRules(target: EgressTarget): string[] {
  const rules: string[] = ['-m conntrack --ctstate ESTABLISHED,RELATED -j RETURN'];
  for (const open of [target.redis, target.collector])
    if (open) rules.push(`-d ${open.address}/32 -p tcp --dport ${open.port} -j RETURN`);
  if (target.proxy) {
    // Only what the nat chain redirected (80 and 443) reaches the proxy; the host's other ports,
    // and the proxy's own ports named directly, stay refused below.
    for (const [from, to] of [
      [80, target.proxy.http],
      [443, target.proxy.tls],
    ])
      rules.push(
        `-p tcp -m conntrack --ctstate DNAT --ctorigdstport ${from} -m addrtype --dst-type LOCAL --dport ${to} -j RETURN`,
      );
  }
  // The host, on every address it has (the gateway, its external ones), and other sandboxes.
  rules.push(...reject('-m addrtype --dst-type LOCAL'));
  rules.push(...reject(`-d ${target.subnet}`));
  const egress = target.egress;
  if (egress === 'none') return [...rules, ...reject('')];
  if (egress === 'internet') {
    for (const ns of target.nameservers) {
      rules.push(`-d ${ns}/32 -p udp --dport 53 -j RETURN`, `-d ${ns}/32 -p tcp --dport 53 -j RETURN`);
    }
    for (const range of NON_PUBLIC_IPV4) rules.push(...reject(`-d ${range}`));
    return [...rules, '-j RETURN'];
  }
  for (const entry of allowEntries(egress)) {
    // IPv6 entries have nothing to match on an IPv4 network (create refuses a network with IPv6).
    if (entry.kind !== 'cidr' || entry.family !== 4) continue;
    const dest = `-d ${entry.address}/${entry.prefix}`;
    if (entry.port === undefined) rules.push(`${dest} -j RETURN`);
    else
      rules.push(
        `${dest} -p tcp --dport ${entry.port} -j RETURN`,
        `${dest} -p udp --dport ${entry.port} -j RETURN`,
      );
  }
  return [...rules, ...reject('')];
}

/**
 * The sandbox's nat chain (same name, nat table): with domains in its allow-list, its TCP 80 and
 * 443 go to the egress proxy, but for destinations its own ranges allow (they stay direct). Empty
 * otherwise, so a policy change never needs a new jump.
 */
export function egressNatRules(target: EgressTarget): string[] {
  if (!target.proxy) return [];
  const rules: string[] = [];
  for (const entry of allowEntries(target.egress)) {
    if (entry.kind !== 'cidr' || entry.family !== 4) continue;
    if (entry.port !== undefined && entry.port !== 80 && entry.port !== 443) continue;
    const port = entry.port === undefined ? '' : ` -p tcp --dport ${entry.port}`;
    rules.push(`-d ${entry.address}/${entry.prefix}${port} -j RETURN`);
  }
  rules.push(
    `-p tcp --dport 80 -j REDIRECT --to-ports ${target.proxy.http}`,
    `-p tcp --dport 443 -j REDIRECT --to-ports ${target.proxy.tls}`,
  );
  return rules;
}

/** The jumps into the chain: `-I <hook> 1 …`, first in each hook (PREROUTING is the nat table's). */
export function egressJumps(
  target: Pick<EgressTarget, 'jobId' | 'mac' | 'bridge'>,
): Array<{ table: 'filter' | 'nat'; hook: string; rule: string }> {
  const rule = `-i ${target.bridge} -m mac --mac-source ${target.mac} -m comment --comment "${egressComment(target.jobId)}" -j ${egressChain(target.jobId)}`;
  return [
    { table: 'filter', hook: 'DOCKER-USER', rule },
    { table: 'filter', hook: 'INPUT', rule },
    { table: 'nat', hook: 'PREROUTING', rule },
  ];
}

/** An iptables-restore --noflush script: declaring the chain empties it, so a re-apply replaces it at once. */
export function egressRestoreScript(target: EgressTarget, withJumps: boolean): string {
  const chain = egressChain(target.jobId);
  const jumps = withJumps ? egressJumps(target) : [];
  const lines: string[] = [];
  for (const [table, rules] of [
    ['filter', egressChainRules(target)],
    ['nat', egressNatRules(target)],
  ] as const) {
    lines.push(`*${table}`, `:${chain} - [0:0]`, ...rules.map((r) => `-A ${chain} ${r}`));
    for (const j of jumps) if (j.table === table) lines.push(`-I ${j.hook} 1 ${j.rule}`);
    lines.push('COMMIT');
  }
  lines.push('');
  return lines.join('\n');
}
