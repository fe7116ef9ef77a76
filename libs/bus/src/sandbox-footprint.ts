import { StreamLimits } from '@sandstream/wire';
import type { KeySpace } from './key-space.js';
import { freePreviewEntries } from './preview-ports.js';
import type { RedisClient } from './redis-connection.js';
import { freeSandboxKeys } from './sandbox-key-cleanup.js';

/**
 * Everything one sandbox owns in Redis, named from the key space: the one list of it. Every
 * destroy (tearDownSandbox: pod-lifecycle, the pool, the run teardown, a resumed start, the
 * reaper's orphans), the reaper's user pass and the dispatcher's over-budget stop free a sandbox
 * through `freeSandboxFootprint`; a job's keys (jobFootprint) name its `named` keys. No backend
 * frees any of it. Pause and snapshots extend this list, not their own.
 * Outside its prefix (the sandbox's own Redis user may not touch them), it has its preview entries
 * (`preview`, preview-ports.ts): freed with the rest, and the label index entry they name with them.
 * Outside the job's slot, a sandbox may also hold volumes (`{<ns>:volumes}:held-by`,
 * volume-store.ts): `tearDownSandbox` gives them back after the backend's destroy, and a hold
 * whose job has ended is cleared by the next taker or the reaper.
 */
export interface SandboxFootprint {
  readonly jobId: string;
  /** The wire's fixed keys (`sandboxKeys`): steps, output, results list, heartbeat, control, claim. */
  readonly named: readonly string[];
  /**
   * Keys made per use, under the same prefix, as globs: step results (`resultKey`), file transfers
   * (`transferKey`), terminals (`terminalKeys`).
   */
  readonly perUse: readonly string[];
  /** Glob matching every key the sandbox may have, named or not (its ACL pattern): what is freed. */
  readonly match: string;
  /**
   * Keys in the job's slot outside the sandbox's prefix that go with the sandbox: its preview
   * hash (public ports, host-form label; KeySpace.jobPreview). A job's keys name them too.
   */
  readonly preview: readonly string[];
  /** What a destroy keeps for the reaper's retention: the job's output. */
  readonly retained: readonly string[];
  /** What says the sandbox's agent is alive: its heartbeat. */
  readonly alive: readonly string[];
}

export function sandboxFootprint(keys: KeySpace, jobId: string): SandboxFootprint {
  const k = keys.sandbox(jobId);
  return {
    jobId,
    named: [k.in, k.events, k.results, k.heartbeat, k.control, k.claim],
    perUse: [`${k.prefix}result:*`, `${k.prefix}xfer:*`, `${k.prefix}tty:*:in`, `${k.prefix}tty:*:out`],
    match: `${k.prefix}*`,
    preview: [keys.jobPreview(jobId)],
    retained: [k.events],
    alive: [k.heartbeat],
  };
}

export interface FreeSandboxFootprintOptions {
  /** Keep the job's output (`retained`, its events stream cut to the usual cap) for retention. */
  keepOutput: boolean;
  /**
   * Keep its heartbeat (`alive`) too: a sandbox freed while its job still runs (over its Redis
   * budget) must not read as lost before its job is failed.
   */
  keepAlive?: boolean;
  /**
   * Keep its preview entries (`preview`): a pause, whose resumed sandbox answers at the same
   * URLs. A paused sandbox that never resumes has them taken with its job by the reaper.
   */
  keepPreview?: boolean;
  /** SCAN COUNT and pause between batches (the reaper paces its walks). */
  count?: number;
  pauseMs?: number;
}

/**
 * Frees a sandbox's footprint: its preview entries (unless `keepPreview`), then every key of its
 * pattern in every database (freeSandboxKeys; a sandbox may name any key under its prefix),
 * except, with `keepOutput`, its events stream, cut to the length the agent and the services
 * write it at (what a sandbox added past that goes). Idempotent. Returns how many keys of its
 * prefix went.
 */
export async function freeSandboxFootprint(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  options: FreeSandboxFootprintOptions,
): Promise<number> {
  const footprint = sandboxFootprint(keys, jobId);
  // First: a host-form URL stops opening before anything else of the sandbox goes.
  if (!options.keepPreview) await freePreviewEntries(redis, keys, jobId);
  const freed = await freeSandboxKeys(redis, keys, jobId, {
    keep: [...(options.keepOutput ? footprint.retained : []), ...(options.keepAlive ? footprint.alive : [])],
    ...(options.count ? { count: options.count } : {}),
    ...(options.pauseMs ? { pauseMs: options.pauseMs } : {}),
  });
  if (options.keepOutput) {
    for (const key of footprint.retained) {
      await redis.xtrim(key, 'MAXLEN', '~', StreamLimits.eventStreamMaxLength).catch(async (err: Error) => {
        // Not a stream (the sandbox wrote something else there): no output of the job's, so it
        // goes; throwing would fail every retry of the destroy.
        if (!err.message.startsWith('WRONGTYPE')) throw err;
        await redis.unlink(key);
      });
    }
  }
  return freed;
}
