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
}

/**
 * Maps spec.network to a Docker network mode.
 * - default: the configured network, by default the managed bridge DEFAULT_SANDBOX_NETWORK
 *   (created if missing, containers on it cannot talk to each other). A Redis URL on loopback
 *   (the host's own Redis, as a workstation gives it) is rewritten to the bridge's gateway, the
 *   host's address on that bridge, where Redis must also listen; `sandboxRedisUrl` replaces it
 *   outright. `host` stays possible as an explicit choice, and is no boundary at all.
 * - deny-egress: the configured internal network, where nothing but what is attached to it (Redis)
 *   can be reached.
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
  },
): Promise<NetworkChoice> {
  if (spec.network === 'default') {
    const networkMode = config.defaultNetwork;
    if (networkMode === 'host') return { networkMode };
    const gateway = await ensureBridgeNetwork(docker, networkMode);
    if (config.sandboxRedisUrl)
      return { networkMode, redisUrl: atAddressOf(config.requestRedisUrl, config.sandboxRedisUrl) };
    const rewritten = gateway ? loopbackToGateway(config.requestRedisUrl, gateway) : undefined;
    return rewritten ? { networkMode, redisUrl: rewritten } : { networkMode };
  }
  if (spec.network === 'none') {
    throw new SandboxStartError(
      'backend_error',
      'spec.network "none" leaves the agent no way to reach Redis; use "deny-egress" (only Redis reachable)',
    );
  }
  if (!config.denyEgress) {
    throw new SandboxStartError(
      'backend_error',
      'spec.network "deny-egress" needs the Docker backend option denyEgress { network, redisUrl } (SANDSTREAM_DOCKER_DENY_EGRESS_NETWORK / _REDIS_URL)',
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

/**
 * The bridge network for `default` sandboxes, created if missing; returns its IPv4 gateway (the
 * host's address on it). Inter-container traffic is off on a network Sandstream creates, so a
 * sandbox cannot reach its neighbours either; a network the operator made is used as it is.
 */
async function ensureBridgeNetwork(docker: Dockerode, name: string): Promise<string | undefined> {
  type NetworkInfo = { IPAM?: { Config?: { Gateway?: string }[] } };
  const gatewayOf = (info: NetworkInfo) =>
    info.IPAM?.Config?.map((c) => c.Gateway).find((g): g is string => !!g && !g.includes(':'));
  try {
    return gatewayOf((await docker.getNetwork(name).inspect()) as NetworkInfo);
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
  return gatewayOf((await docker.getNetwork(name).inspect()) as NetworkInfo);
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
