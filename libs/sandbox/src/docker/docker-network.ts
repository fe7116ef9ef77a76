import type Dockerode from 'dockerode';
import { SandboxStartError } from '../backend.js';
import type { SandboxSpec } from '../sandbox-spec.js';
import { isConflict, isNotFound } from './docker-errors.js';

export interface DenyEgressConfig {
  /** An internal Docker network (created if missing): no route off the host, no NAT. */
  network: string;
  /**
   * Redis as reached from that network, e.g. a Redis container or proxy attached to it, or a
   * Redis bound to the network's gateway address. Sandboxes get this URL instead of the default.
   */
  redisUrl: string;
}

export interface NetworkChoice {
  networkMode: string;
  /** Set when the sandbox must use a different Redis URL than the request's. */
  redisUrl?: string;
}

/**
 * Maps spec.network to a Docker network mode.
 * - default: the configured network (`host` by default, so a Redis on 127.0.0.1 is reachable on a
 *   developer machine; production sets a bridge network that can reach Redis).
 * - deny-egress: the configured internal network, where nothing but what is attached to it (Redis)
 *   can be reached.
 * - none: refused. The agent is driven over Redis, so a sandbox with no network at all could never
 *   become ready; failing at create with the reason beats failing at the start deadline.
 */
export async function chooseNetwork(
  docker: Dockerode,
  spec: SandboxSpec,
  config: { defaultNetwork: string; denyEgress?: DenyEgressConfig },
): Promise<NetworkChoice> {
  if (spec.network === 'default') return { networkMode: config.defaultNetwork };
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
  return { networkMode: config.denyEgress.network, redisUrl: config.denyEgress.redisUrl };
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
