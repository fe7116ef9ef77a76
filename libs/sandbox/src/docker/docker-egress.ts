import { lookup } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { allowEntries, describeEgress, type Egress } from '@sandstream/wire';
import { SandboxStartError } from '../backend.js';
import type { BridgeInfo } from './docker-network.js';
import type { EgressProxy, EgressProxyPorts } from './egress-proxy.js';
import type { EgressTarget } from './egress-rules.js';
import type { IptablesEgressFirewall } from './iptables-firewall.js';

/**
 * The host's name servers, where the engine's resolver (127.0.0.11 in the container) sends a
 * sandbox's lookups from the sandbox's own address: `internet` must reach them on port 53, even
 * when they sit in a private range. Loopback ones are the engine's business, not a sandbox's.
 */
export async function hostNameservers(path = '/etc/resolv.conf'): Promise<string[]> {
  const text = await readFile(path, 'utf8').catch(() => '');
  return [...text.matchAll(/^\s*nameserver\s+(\S+)/gm)]
    .map((m) => m[1] as string)
    .filter((ns) => isIP(ns) === 4 && !ns.startsWith('127.'));
}

/** The IPv4 address and port a URL names (the sandbox's Redis, the agent's collector). */
async function endpointAddress(
  endpointUrl: string,
  defaultPort: number,
): Promise<{ address: string; port: number }> {
  const url = new URL(endpointUrl);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = Number(url.port || defaultPort);
  if (isIP(host) === 4) return { address: host, port };
  const { address } = await lookup(host, { family: 4 });
  return { address, port };
}

/** What the rules need, or a start failure saying why this policy cannot be enforced here. */
export async function egressTarget(input: {
  jobId: string;
  mac: string;
  bridge: BridgeInfo;
  redisUrl: string;
  /** The agent's OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT in its environment), if it has one. */
  collectorUrl?: string;
  egress: Egress;
  /** The egress proxy, started when the allow-list names domains (egress-proxy.ts). */
  proxy?: EgressProxy;
}): Promise<EgressTarget> {
  const { egress, bridge } = input;
  if (bridge.ipv6) {
    throw new SandboxStartError(
      'backend_error',
      `the sandbox network (${bridge.iface}) has IPv6 on; the egress rules are IPv4 only, so a sandbox could leave by IPv6: use a network without IPv6`,
    );
  }
  const domains = allowEntries(egress).some((e) => e.kind === 'domain');
  let proxy: EgressProxyPorts | undefined;
  if (domains) {
    if (!input.proxy)
      throw new SandboxStartError(
        'backend_error',
        `spec.network egress ${describeEgress(egress)}: domain entries need the egress proxy, which this backend was given none of`,
      );
    try {
      proxy = await input.proxy.ports();
    } catch (err) {
      throw new SandboxStartError(
        'backend_error',
        `egress proxy could not listen: ${(err as Error).message}`,
      );
    }
  }
  let redis: { address: string; port: number };
  try {
    redis = await endpointAddress(input.redisUrl, 6379);
  } catch (err) {
    throw new SandboxStartError(
      'backend_error',
      `egress rules: cannot resolve the sandbox's Redis host (${(err as Error).message})`,
    );
  }
  // A collector pod-lifecycle cannot resolve gets no rule: the agent's spans are then refused
  // like any other connection, and the sandbox runs (its spans are not worth a failed start).
  const collector = input.collectorUrl
    ? await endpointAddress(input.collectorUrl, input.collectorUrl.startsWith('https:') ? 443 : 80).catch(
        () => undefined,
      )
    : undefined;
  return {
    jobId: input.jobId,
    mac: input.mac,
    bridge: bridge.iface,
    subnet: bridge.subnet,
    redis,
    ...(collector ? { collector } : {}),
    nameservers: egress === 'internet' ? await hostNameservers() : [],
    egress,
    ...(proxy ? { proxy } : {}),
  };
}

/** Installs the rules and checks them; a failure is the start's, never an open sandbox. */
export async function installEgress(
  firewall: IptablesEgressFirewall,
  target: EgressTarget,
  withJumps: boolean,
): Promise<void> {
  try {
    await firewall.apply(target, withJumps);
  } catch (err) {
    throw new SandboxStartError(
      'backend_error',
      `egress rules (${describeEgress(target.egress)}) could not be installed, so the sandbox is not started: ${(err as Error).message}`,
    );
  }
}

/**
 * Removes the rules of sandboxes whose container is gone (a crash between destroy's two halves, a
 * restart of the services). `liveJobIds` lists the job ids of every sandbox container on the
 * engine, of any installation (two installations may share one host firewall); it is called after
 * the rules were read, and a container is created before its rules, so a sandbox being created
 * now is never taken for an orphan.
 */
export async function sweepEgress(
  firewall: IptablesEgressFirewall,
  liveJobIds: () => Promise<Set<string>>,
): Promise<number> {
  const installed = await firewall.installed();
  if (installed.length === 0) return 0;
  const live = await liveJobIds();
  const orphans = installed.filter((c) => c.jobId === undefined || !live.has(c.jobId));
  await firewall.removeChains(orphans.map((c) => c.chain));
  return orphans.length;
}
