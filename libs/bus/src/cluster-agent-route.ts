import type { Cluster } from 'ioredis';
import type { DispatchKeys } from './dispatch-keys.js';

export interface AgentRoute {
  /** The master that holds the job's slot, with the credentials and scheme of `agentRedisUrl`. */
  redisUrl: string;
  /** A completion shard whose stream lives on that same master. */
  notifyStream: string;
}

/**
 * On a Redis Cluster the agent stays a plain single-node client (it has no cluster support, and
 * a sandbox image should not need one): it connects straight to the master that owns its job's
 * hash slot, where all its `sandbox:{id}:*` keys live, and it notifies a completion shard that
 * lives on the same master — so every command it sends is served by that node, including its
 * one pipeline (result LPUSH + notice XADD). The dispatcher reads every shard, so which one a job
 * uses does not matter to it. Limitation: a resharding or failover while a job runs moves the
 * slot away from the agent's node; the agent then sees MOVED errors and the job fails as lost.
 */
/** A key's slot never changes (CRC16 of its hash tag), so the shard streams' slots are asked once. */
const slotCache = new Map<string, number>();

export async function clusterAgentRoute(
  cluster: Cluster,
  dispatchKeys: DispatchKeys,
  jobId: string,
  agentRedisUrl: string,
): Promise<AgentRoute> {
  const slotOf = async (key: string) => {
    let slot = slotCache.get(key);
    if (slot === undefined) {
      slot = Number(await cluster.call('CLUSTER', 'KEYSLOT', key));
      if (slotCache.size < 10_000) slotCache.set(key, slot);
    }
    return slot;
  };
  const masterOf = (slot: number) => cluster.slots[slot]?.[0];
  const jobNode = masterOf(await slotOf(dispatchKeys.keySpace.job(jobId)));
  if (!jobNode) throw new Error(`no cluster node serves the slot of job ${jobId} (cluster not ready?)`);
  const candidates: string[] = [];
  for (const shard of dispatchKeys.allShards()) {
    const stream = dispatchKeys.completionStream(shard);
    if (masterOf(await slotOf(stream)) === jobNode) candidates.push(stream);
  }
  if (candidates.length === 0) {
    throw new Error(
      `no completion shard lives on ${jobNode}: raise COMPLETION_SHARDS so every master holds at least one`,
    );
  }
  const notifyStream = candidates[dispatchKeys.shardOf(jobId) % candidates.length] as string;
  const url = new URL(agentRedisUrl);
  const at = jobNode.lastIndexOf(':');
  url.hostname = jobNode.slice(0, at);
  url.port = jobNode.slice(at + 1);
  return { redisUrl: url.toString(), notifyStream };
}
