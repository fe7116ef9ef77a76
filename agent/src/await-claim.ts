import type { PoolClaim } from '@sandstream/wire';
import { fastPoolClaim, POOL_CLAIM_MAX_BYTES, sandboxKeys } from '@sandstream/wire/lean';
import { Redis } from 'ioredis';
import { environmentChanged } from './agent-environment.js';
import type { RunConfig } from './config.js';
import { fullWire } from './full-wire.js';
import type { Logger } from './logger.js';
import { announceReady } from './ready-announcement.js';
import { closeNow, connectionOptions, reconnectDelayMs } from './redis-connections.js';

const STOPPED = Symbol('stopped');

const STALLED = Symbol('stalled');

class StalledError extends Error {
  constructor() {
    super('redis did not answer; replacing the connection');
  }
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Outcome of a warm pool member's wait: the job it now serves, a stop signal, or a bad claim. */
export type ClaimWait =
  | { kind: 'claimed'; config: RunConfig; claim: PoolClaim }
  | { kind: 'stopped' }
  | { kind: 'invalid'; message: string };

/**
 * A warm pool member's first phase. Booted as the member (its --job-id is the member's id, its
 * Redis user may touch only the member's claim and heartbeat keys), the agent keeps a heartbeat,
 * announces itself once, and blocks on its claim key. The one claim it gets names the job it now
 * serves; the agent takes on that identity (job id, the job's Redis user — same password — the
 * job's notify stream, idleness, command env) and the normal loop starts with nothing left to
 * boot. A member serves one claim only: after it, the member's keys are never read again.
 */
export async function awaitClaim(config: RunConfig, log: Logger, signal: AbortSignal): Promise<ClaimWait> {
  const keys = sandboxKeys(config.jobId, config.keyStyle);
  const open = () => {
    const client = new Redis(config.redisUrl, connectionOptions(`sandstream-agent:${config.jobId}:claim`));
    client.on('error', (err: Error) =>
      log.debug('redis connection error', { role: 'claim', error: err.message }),
    );
    return client;
  };
  let redis = open();
  const onAbort = () => closeNow(redis);
  signal.addEventListener('abort', onAbort, { once: true });
  // The heartbeat outlives a few missed refreshes: the pool keeper reads a missing one as a dead member.
  const ttlMs = config.heartbeatIntervalMs * 3;
  // BRPOP's timeout is the heartbeat period: one connection both waits and keeps the heartbeat.
  const waitSeconds = Math.max(config.heartbeatIntervalMs / 1000, 0.1);
  // A stop must not wait for Redis: while it is unreachable a command waits for the reconnect
  // (maxRetriesPerRequest: null), and ioredis does not always settle it on disconnect.
  const stopped = new Promise<typeof STOPPED>((resolve) => {
    if (signal.aborted) resolve(STOPPED);
    else signal.addEventListener('abort', () => resolve(STOPPED), { once: true });
  });
  // Nor must the wait hang on such a command: a BRPOP resent after a restart that then failed
  // authentication was seen never to settle (ioredis drops it from its queue on the next
  // reconnect), leaving the member alive, silent and without a heartbeat. A command unanswered
  // this long past its own timeout is given up, and the connection replaced.
  const stallMs = Math.max(5000, config.heartbeatIntervalMs * 2);
  const orStop = <T>(command: Promise<T>, withinMs: number): Promise<T | typeof STOPPED | typeof STALLED> => {
    command.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<typeof STALLED>((resolve) => {
      timer = setTimeout(() => resolve(STALLED), withinMs);
    });
    return Promise.race([command, stopped, stalled]).finally(() => clearTimeout(timer));
  };
  const beat = () => orStop(redis.set(keys.heartbeat, String(process.pid), 'PX', ttlMs), stallMs);
  try {
    // Redis may go away at any point of the wait (a restart, a failover, our user not re-created
    // yet): the member keeps waiting, reconnecting, and is back as it was — same sandbox, same
    // identity — once Redis is. Only the stop signal (or a claim) ends the wait.
    let announced = false;
    let beatDue = true;
    let outage = 0;
    while (!signal.aborted) {
      try {
        if (beatDue) {
          const beaten = await beat();
          if (beaten === STOPPED) break;
          if (beaten === STALLED) throw new StalledError();
          beatDue = false;
          if (outage > 0) log.info('redis is back; warm pool member still waiting for a claim');
          outage = 0;
          if (!announced) {
            announceReady(redis, keys.ready, log);
            log.info('warm pool member waiting for a claim');
            announced = true;
          }
        }
        const popped = await orStop(redis.brpop(keys.claim, waitSeconds), waitSeconds * 1000 + stallMs);
        if (popped === STOPPED) break;
        if (popped === STALLED) throw new StalledError();
        if (popped === null) {
          beatDue = true;
          continue;
        }
        const parsed = await parseClaim(popped[1]);
        if (parsed.kind === 'invalid') return parsed;
        // The member's heartbeat goes with its identity (sent, not awaited: the job's own
        // heartbeat starts with the loop, and nothing waits on this one any more).
        redis.del(keys.heartbeat).catch(() => undefined);
        return { kind: 'claimed', claim: parsed.claim, config: bindClaim(config, parsed.claim) };
      } catch (err) {
        if (signal.aborted) break;
        // LOADING while Redis replays its AOF, NOAUTH/WRONGPASS until pod-lifecycle re-creates
        // our user, a connection error: all pass. The heartbeat goes first once Redis answers.
        if (outage === 0) {
          log.warn('redis unavailable while waiting for a claim; retrying', {
            error: (err as Error).message,
          });
        }
        outage++;
        beatDue = true;
        if (err instanceof StalledError) {
          closeNow(redis);
          redis = open();
        }
        if ((await orStop(delay(reconnectDelayMs(outage)), 60_000)) === STOPPED) break;
      }
    }
    return { kind: 'stopped' };
  } finally {
    signal.removeEventListener('abort', onAbort);
    closeNow(redis);
  }
}

async function parseClaim(
  raw: string,
): Promise<{ kind: 'ok'; claim: PoolClaim } | { kind: 'invalid'; message: string }> {
  if (Buffer.byteLength(raw) > POOL_CLAIM_MAX_BYTES) {
    return { kind: 'invalid', message: `claim is larger than ${POOL_CLAIM_MAX_BYTES} bytes` };
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    return { kind: 'invalid', message: `claim is not JSON: ${(err as Error).message}` };
  }
  const claim = fastPoolClaim(json);
  if (claim) return { kind: 'ok', claim };
  // Not sure without zod: the schema decides, and words a refusal.
  const { PoolClaimSchema, formatIssues } = await fullWire();
  const parsed = PoolClaimSchema.safeParse(json);
  if (!parsed.success) return { kind: 'invalid', message: `invalid claim: ${formatIssues(parsed.error)}` };
  return { kind: 'ok', claim: parsed.data };
}

/**
 * The run configuration of the claimed job, and its command environment applied to this
 * process (every step's process inherits it).
 */
export function bindClaim(config: RunConfig, claim: PoolClaim): RunConfig {
  for (const name of claim.unsetEnv) delete process.env[name];
  for (const [name, value] of Object.entries(claim.env)) process.env[name] = value;
  environmentChanged();
  let redisUrl = config.redisUrl;
  if (claim.username !== undefined) {
    const url = new URL(config.redisUrl);
    url.username = encodeURIComponent(claim.username);
    redisUrl = url.toString();
  }
  return {
    ...config,
    jobId: claim.jobId,
    redisUrl,
    keyStyle: 'tagged',
    notifyStream: claim.notifyStream ?? config.notifyStream,
    maxIdleWaits: claim.live ? 0 : config.maxIdleWaits,
    awaitClaim: false,
  };
}
