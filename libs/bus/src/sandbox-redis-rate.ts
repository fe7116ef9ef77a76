import { sandboxKeyPrefix } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { jobIdFromKey } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import { SANDBOX_USER_PREFIX } from './sandbox-acl.js';
import { redisMasters, scanEveryDatabase } from './scan-keys.js';

/**
 * What Redis itself counts of each sandbox's commands, at one moment: cumulative counters, so
 * the difference of two readings over the time between them is a rate.
 *
 * - `connections`: the per-connection `tot-cmds` of CLIENT LIST (Valkey 8, Redis 8.x): every
 *   command of every connection its Redis user holds. Exact; a connection that closed between
 *   two readings takes its last commands with it (an undercount, never an overcount).
 * - `keys`: where the server has no per-connection counter (Redis 7.0: CLIENT LIST shows only
 *   instantaneous fields, qbuf, argv-mem, cmd, idle in whole seconds), what its keys count: a
 *   stream's `entries-added` (XINFO STREAM, every XADD ever made to it, trimmed ones included)
 *   and a list's length (LPUSHes less what was popped: a lower bound). A flood of SET, DEL,
 *   EXPIRE or PUBLISH leaves no count there; docs/step-dispatcher.md says so.
 */
export type RateSource = 'connections' | 'keys';

export interface SandboxRedisCounters {
  source: RateSource;
  at: number;
  /** jobId → counter id (a connection, or a key in a database) → its cumulative count. */
  counts: Map<string, Map<string, number>>;
  /** The sandboxes this reading covers (a sandbox not covered by the earlier one gets no rate yet). */
  measured: ReadonlySet<string>;
  /** About how many commands the reading itself sent (the caller's view of Redis' total leaves them out). */
  commands: number;
}

export interface SandboxRedisRate {
  jobId: string;
  /** Commands (source `connections`) or counted writes (source `keys`) per second. */
  perSecond: number;
  source: RateSource;
  /** The time the rate was measured over. */
  windowMs: number;
}

/** `total_commands_processed` summed over the masters: one O(1) INFO per node, every command of everyone. */
export async function redisCommandsProcessed(redis: RedisClient): Promise<number> {
  const infos = await Promise.all(redisMasters(redis).map((node) => node.info('stats')));
  return infos.reduce(
    (sum, info) => sum + Number(/^total_commands_processed:(\d+)/m.exec(info)?.[1] ?? 0),
    0,
  );
}

/** CLIENT LIST as records of its `name=value` fields (a version-safe reader skips what it does not know). */
export function parseClientList(text: string): Map<string, string>[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const fields = new Map<string, string>();
      for (const pair of line.trim().split(' ')) {
        const eq = pair.indexOf('=');
        if (eq > 0) fields.set(pair.slice(0, eq), pair.slice(eq + 1));
      }
      return fields;
    });
}

/** Each node's CLIENT LIST (O(connections) on the server; no key is read). */
async function clientLists(redis: RedisClient): Promise<Map<string, string>[][]> {
  const lists = await Promise.all(redisMasters(redis).map((node) => node.client('LIST') as Promise<string>));
  return lists.map(parseClientList);
}

/** The running sandbox a connection belongs to, by its Redis user; undefined for anyone else's. */
function jobOfClient(
  client: Map<string, string>,
  jobIds: ReadonlySet<string>,
  userPrefix: string,
): string | undefined {
  const user = client.get('user') ?? '';
  const jobId = user.startsWith(userPrefix) ? user.slice(userPrefix.length) : undefined;
  return jobId !== undefined && jobIds.has(jobId) ? jobId : undefined;
}

/**
 * Per-connection counters of the running sandboxes' users, or null where the server does not
 * report `tot-cmds`, or no running sandbox is connected under a user of its own (SANDBOX_ACL off:
 * every agent is `default`, and connections cannot be told apart).
 */
function connectionCounters(
  lists: Map<string, string>[][],
  jobIds: ReadonlySet<string>,
  userPrefix: string,
): Map<string, Map<string, number>> | null {
  const counts = new Map<string, Map<string, number>>();
  let reported = false;
  lists.forEach((list, node) => {
    for (const client of list) {
      const total = client.get('tot-cmds');
      if (total === undefined) continue;
      reported = true;
      const jobId = jobOfClient(client, jobIds, userPrefix);
      if (jobId === undefined) continue;
      const own = counts.get(jobId) ?? new Map<string, number>();
      own.set(`${node}:${client.get('id')}`, Number(total));
      counts.set(jobId, own);
    }
  });
  return reported && counts.size > 0 ? counts : null;
}

/**
 * The sandboxes worth reading key counters of. Where sandboxes have users of their own, only
 * those with a connection that sent something within the last two seconds (CLIENT LIST `idle`,
 * whole seconds): one that has not cannot be flooding now, and reading every running sandbox's
 * keys would cost Redis the more the more sandboxes run. Without users (SANDBOX_ACL off), all.
 */
function activeSandboxes(
  lists: Map<string, string>[][],
  jobIds: ReadonlySet<string>,
  userPrefix: string,
): ReadonlySet<string> {
  let users = false;
  const active = new Set<string>();
  for (const client of lists.flat()) {
    if (!(client.get('user') ?? '').startsWith(userPrefix)) continue;
    users = true;
    const jobId = jobOfClient(client, jobIds, userPrefix);
    if (jobId !== undefined && Number(client.get('idle') ?? 0) <= 2) active.add(jobId);
  }
  return users ? active : jobIds;
}

const SANDBOX_KEY_PATTERN = `${sandboxKeyPrefix('*', 'tagged')}*`;

/** The streams' entries-added and the lists' lengths of the running sandboxes' keys, in every database. */
async function keyCounters(
  redis: RedisClient,
  jobIds: ReadonlySet<string>,
): Promise<{ counts: Map<string, Map<string, number>>; commands: number }> {
  const counts = new Map<string, Map<string, number>>();
  let commands = 0;
  for await (const { db, client, keys } of scanEveryDatabase(redis, {
    match: SANDBOX_KEY_PATTERN,
    count: 1000,
  })) {
    commands += 1; // the SCAN call that found them (one per batch at least)
    const ours = keys.filter((key) => jobIds.has(jobIdFromKey(key) ?? ''));
    commands += ours.length * 2;
    // Pipelined by ioredis (and routed per node on a Cluster); a key gone since SCAN answers none.
    const types = await Promise.all(ours.map((key) => client.type(key)));
    const values = await Promise.all(
      ours.map(async (key, i) => {
        if (types[i] === 'list') return client.llen(key);
        if (types[i] !== 'stream') return null;
        const info = (await (client as Redis).call('XINFO', 'STREAM', key).catch(() => null)) as
          | (string | number)[]
          | null;
        const at = info?.indexOf('entries-added') ?? -1;
        // Before Redis 7.0 there is no entries-added: the length is the lower bound left.
        return at >= 0 ? Number(info?.[at + 1]) : Number(info?.[(info?.indexOf('length') ?? -2) + 1] ?? 0);
      }),
    );
    ours.forEach((key, i) => {
      const value = values[i];
      if (value === null || value === undefined) return;
      const jobId = jobIdFromKey(key) as string;
      const own = counts.get(jobId) ?? new Map<string, number>();
      own.set(`${db}:${key}`, value);
      counts.set(jobId, own);
    });
  }
  return { counts, commands };
}

/**
 * Reads the running sandboxes' counters (see RateSource): from the connections where the server
 * counts per connection, else from the keys of the sandboxes active now (a SCAN of sandbox keys,
 * so only worth doing while Redis as a whole is busy enough for one sandbox to be over its rate).
 */
export async function sandboxRedisCounters(
  redis: RedisClient,
  jobIds: ReadonlySet<string>,
  userPrefix = SANDBOX_USER_PREFIX,
): Promise<SandboxRedisCounters> {
  const lists = await clientLists(redis);
  const listed = lists.length;
  const connections = connectionCounters(lists, jobIds, userPrefix);
  if (connections) {
    return { source: 'connections', at: Date.now(), counts: connections, measured: jobIds, commands: listed };
  }
  const measured = activeSandboxes(lists, jobIds, userPrefix);
  const { counts, commands } =
    measured.size > 0 ? await keyCounters(redis, measured) : { counts: new Map(), commands: 0 };
  return { source: 'keys', at: Date.now(), counts, measured, commands: listed + commands };
}

/**
 * Each sandbox's rate between two readings of the same source. A counter seen only in the later
 * reading (a connection opened, a key created since) counts from zero: it started within the
 * window (for keys, only in a sandbox the earlier reading covered). A counter that went down (a list popped, a key deleted and made again) counts nothing.
 */
export function sandboxRedisRates(
  before: SandboxRedisCounters,
  after: SandboxRedisCounters,
): SandboxRedisRate[] {
  const windowMs = after.at - before.at;
  if (before.source !== after.source || windowMs <= 0) return [];
  const rates: SandboxRedisRate[] = [];
  for (const [jobId, now] of after.counts) {
    // A sandbox's keys read for the first time hold everything it ever wrote, not a window's worth.
    if (after.source === 'keys' && !before.measured.has(jobId)) continue;
    const then = before.counts.get(jobId);
    let delta = 0;
    for (const [counter, value] of now) delta += Math.max(0, value - (then?.get(counter) ?? 0));
    rates.push({ jobId, perSecond: (delta * 1000) / windowMs, source: after.source, windowMs });
  }
  return rates.sort((a, b) => b.perSecond - a.perSecond);
}

const OVER_RATE = 'over its Redis rate: ';

/** The failure reason of a sandbox stopped for how fast it wrote; sandbox records read it back as `redis-rate`. */
export function redisRateReason(rate: SandboxRedisRate, limitPerSecond: number): string {
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const what = rate.source === 'connections' ? 'commands' : 'writes (stream entries and list items)';
  return `${OVER_RATE}the sandbox sent ${n(rate.perSecond)} ${what} per second to Redis over ${n(rate.windowMs)} ms, over its limit of ${n(limitPerSecond)} per second (SANDBOX_REDIS_RATE_LIMIT); it was cut off`;
}

export function isRedisRateReason(reason: string | undefined): boolean {
  return reason?.startsWith(OVER_RATE) ?? false;
}
