import { describeEgress, egressOf } from '@sandstream/wire';
import type Dockerode from 'dockerode';
import { SandboxStartError } from '../backend.js';
import type { SandboxSpec } from '../sandbox-spec.js';
import { isConflict, isNotFound } from './docker-errors.js';

export interface DenyEgressConfig {
  /** An internal Docker network (created if missing): no route off the host, no NAT. */
  network: string;
  /**
   * Redis as reached from that network, e.g. a Redis container or proxy attached to it, or a
   * Redis bound to the network's gateway address. Sandboxes get the request's URL (their own
   * user) at this URL's address (atAddressOf).
   */
  redisUrl: string;
}

/**
 * The bridge network `default` sandboxes join unless SANDSTREAM_DOCKER_NETWORK names another:
 * not `host`, where a step reaches every port of the host, loopback-bound services included.
 */
export const DEFAULT_SANDBOX_NETWORK = 'sandstream-sandboxes';
/** Its host-side interface, named so a host firewall rule can match it (docs/sandbox-backends.md). */
export const DEFAULT_SANDBOX_BRIDGE = 'sandstream0';

export interface NetworkChoice {
  networkMode: string;
  /** Set when the sandbox must use a different Redis URL than the request's. */
  redisUrl?: string;
  /** The bridge the sandbox joins, for its egress rules (absent on `host` and the internal network). */
  bridge?: BridgeInfo;
}

/** What egress rules need to know of a bridge network. */
export interface BridgeInfo {
  /** The host-side interface (sandstream0, br-<id>). */
  iface: string;
  /** IPv4 subnet and gateway (the host's address on it). */
  subnet: string;
  gateway?: string;
  /** IPv6 on: the rules are IPv4 only, so a sandbox could leave by IPv6. */
  ipv6: boolean;
}

/**
 * Maps spec.network to a Docker network mode. With egress rules enforced (the default), every
 * policy joins the bridge below and its rules decide what it reaches (egress-rules.ts).
 * - default / internet: the configured network, by default the managed bridge DEFAULT_SANDBOX_NETWORK
 *   (created if missing, containers on it cannot talk to each other). A Redis URL on loopback
 *   (the host's own Redis, as a workstation gives it) is rewritten to the bridge's gateway, the
 *   host's address on that bridge, where Redis must also listen; `sandboxRedisUrl` replaces it
 *   outright. `host` stays possible as an explicit choice, and is no boundary at all.
 * - deny-egress / none, rules off: the configured internal network, where nothing but what is
 *   attached to it (Redis) can be reached. An allow-list needs the rules.
 * - none: refused. The agent is driven over Redis, so a sandbox with no network at all could never
 *   become ready; failing at create with the reason beats failing at the start deadline.
 */
export async function chooseNetwork(
  docker: Dockerode,
  spec: SandboxSpec,
  config: {
    defaultNetwork: string;
    denyEgress?: DenyEgressConfig;
    /** The URL the request gives the agent, for the loopback rewrite. */
    requestRedisUrl: string;
    sandboxRedisUrl?: string;
    /** Egress rules are installed (iptables): every policy runs on the bridge under its rules. */
    enforced: boolean;
  },
): Promise<NetworkChoice> {
  const egress = egressOf(spec.network);
  if (egress === undefined) {
    throw new SandboxStartError(
      'backend_error',
      'spec.network "none" leaves the agent no way to reach Redis; use { egress: "none" } (only Redis reachable)',
    );
  }
  if (egress === 'internet' || config.enforced) {
    const networkMode = config.defaultNetwork;
    if (networkMode === 'host') {
      if (egress !== 'internet') {
        throw new SandboxStartError(
          'backend_error',
          `spec.network egress ${describeEgress(egress)}: sandboxes on the host network (SANDSTREAM_DOCKER_NETWORK=host) share the host's network and no rule can confine them; use a bridge network`,
        );
      }
      return { networkMode };
    }
    const bridge = await ensureBridgeNetwork(docker, networkMode);
    const chosen = (redisUrl?: string): NetworkChoice => ({
      networkMode,
      ...(redisUrl ? { redisUrl } : {}),
      ...(bridge ? { bridge } : {}),
    });
    if (config.sandboxRedisUrl) return chosen(atAddressOf(config.requestRedisUrl, config.sandboxRedisUrl));
    return chosen(bridge?.gateway ? loopbackToGateway(config.requestRedisUrl, bridge.gateway) : undefined);
  }
  if (egress !== 'none') {
    throw new SandboxStartError(
      'backend_error',
      `spec.network egress ${describeEgress(egress)} needs the Docker egress rules (SANDSTREAM_DOCKER_EGRESS=iptables, the default), which this backend has turned off`,
    );
  }
  if (!config.denyEgress) {
    throw new SandboxStartError(
      'backend_error',
      'spec.network egress "none" needs the Docker egress rules (SANDSTREAM_DOCKER_EGRESS=iptables, the default) or, with them off, the backend option denyEgress { network, redisUrl } (SANDSTREAM_DOCKER_DENY_EGRESS_NETWORK / _REDIS_URL)',
    );
  }
  await ensureInternalNetwork(docker, config.denyEgress.network);
  return {
    networkMode: config.denyEgress.network,
    redisUrl: atAddressOf(config.requestRedisUrl, config.denyEgress.redisUrl),
  };
}

/**
 * The request's URL (the sandbox's own ACL user, db and options) at the configured URL's scheme,
 * host and port. Taking the configured URL whole would hand every sandbox the operator's
 * credentials, or none, instead of its own user; its credentials count only when the request
 * carries none (no per-sandbox users).
 */
export function atAddressOf(requestUrl: string, configuredUrl: string): string {
  const url = new URL(requestUrl);
  const address = new URL(configuredUrl);
  if (!url.username && !url.password) return configuredUrl;
  url.protocol = address.protocol;
  url.hostname = address.hostname;
  url.port = address.port;
  return url.toString();
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** The same URL (credentials, db, options kept) with a loopback host replaced by `gateway`. */
export function loopbackToGateway(redisUrl: string, gateway: string): string | undefined {
  const url = new URL(redisUrl);
  if (!LOOPBACK_HOSTS.has(url.hostname)) return undefined;
  url.hostname = gateway;
  return url.toString();
}

type NetworkInfo = {
  Id?: string;
  EnableIPv6?: boolean;
  Options?: Record<string, string>;
  IPAM?: { Config?: { Subnet?: string; Gateway?: string }[] };
};

/** The bridge's interface, IPv4 subnet and gateway; undefined for a network that is no bridge. */
export function bridgeInfo(info: NetworkInfo & { Driver?: string }): BridgeInfo | undefined {
  if (info.Driver !== undefined && info.Driver !== 'bridge') return undefined;
  const v4 = info.IPAM?.Config?.find((c) => c.Subnet && !c.Subnet.includes(':'));
  if (!v4?.Subnet || !info.Id) return undefined;
  return {
    iface: info.Options?.['com.docker.network.bridge.name'] ?? `br-${info.Id.slice(0, 12)}`,
    subnet: v4.Subnet,
    ...(v4.Gateway ? { gateway: v4.Gateway } : {}),
    ipv6: info.EnableIPv6 === true,
  };
}

/**
 * The bridge network for sandboxes, created if missing; returns its interface, subnet and IPv4
 * gateway (the host's address on it). Inter-container traffic is off on a network Sandstream
 * creates, so a sandbox cannot reach its neighbours either; a network the operator made is used
 * as it is (the egress rules refuse neighbours there too).
 */
async function ensureBridgeNetwork(docker: Dockerode, name: string): Promise<BridgeInfo | undefined> {
  try {
    return bridgeInfo((await docker.getNetwork(name).inspect()) as NetworkInfo);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const options: Record<string, string> = { 'com.docker.network.bridge.enable_icc': 'false' };
  if (name === DEFAULT_SANDBOX_NETWORK) options['com.docker.network.bridge.name'] = DEFAULT_SANDBOX_BRIDGE;
  try {
    await docker.createNetwork({
      Name: name,
      Driver: 'bridge',
      CheckDuplicate: true,
      Options: options,
      Labels: { 'app.kubernetes.io/managed-by': 'sandstream' },
    });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  return bridgeInfo((await docker.getNetwork(name).inspect()) as NetworkInfo);
}

async function ensureInternalNetwork(docker: Dockerode, name: string): Promise<void> {
  try {
    const info = (await docker.getNetwork(name).inspect()) as { Internal?: boolean };
    if (!info.Internal) {
      throw new SandboxStartError(
        'backend_error',
        `Docker network "${name}" exists but is not internal, so it would not deny egress; recreate it with --internal`,
      );
    }
    return;
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  try {
    await docker.createNetwork({
      Name: name,
      Internal: true,
      CheckDuplicate: true,
      Labels: { 'app.kubernetes.io/managed-by': 'sandstream' },
    });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
}
