import { newShutdownStep } from '@sandstream/wire';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import type { SandboxAcl } from './sandbox-acl.js';
import { freeSandboxFootprint } from './sandbox-footprint.js';
import { VolumeStore } from './volume-store.js';
import type { WarmPoolStore } from './warm-pool-store.js';

/** What tearing a sandbox down needs of a backend (libs/sandbox's `SandboxBackend` is one). */
export interface SandboxDestroyer {
  destroy(ref: { jobId: string; backend: string; id: string }, options: { graceMs: number }): Promise<void>;
}

export interface SandboxTeardownDeps {
  redis: RedisClient;
  keys: KeySpace;
  backend: SandboxDestroyer;
  acl: SandboxAcl | null;
  /** Warm pools: a member's record goes with its sandbox. */
  pools?: WarmPoolStore | undefined;
}

export interface SandboxTeardown {
  /** The id whose keys and Redis user the sandbox used (a job's, or an unclaimed member's). */
  jobId: string;
  /** The backend's sandbox, when one was made (for a claimed member, named by the member's id). */
  ref?: { jobId: string; backend: string; id: string } | undefined;
  /**
   * A warm pool member the sandbox was (claimed by `jobId`, or `jobId` itself): its record, its
   * Redis user and its own keys go too.
   */
  member?: string | undefined;
  graceMs: number;
  /** Keep the job's output for retention (a job's destroy); a pool member has none worth keeping. */
  keepOutput: boolean;
  /**
   * Keep the job's volume holds: a start attempt's sandbox goes, the job's next attempt mounts
   * the same volumes (start-sandbox's retry). Every other teardown gives them back.
   */
  keepVolumeHolds?: boolean;
  /**
   * Keep its preview entries (public ports, host-form label): the job's next start attempt, and a
   * pause (`keepFiles`), answer at the same URLs. Every other teardown frees them.
   */
  keepPreview?: boolean;
  /** SCAN pacing of the key walk (the reaper's). */
  scan?: { count?: number; pauseMs?: number };
  /**
   * A pause: called with the backend's sandbox while it still exists, before anything of it
   * goes, to keep its files (SandboxFilesKeeper); the teardown goes on only once they are kept,
   * and a failure leaves everything in place for the retried teardown.
   */
  keepFiles?: ((ref: { jobId: string; backend: string; id: string }) => Promise<void>) | undefined;
}

/**
 * The one way a sandbox goes: the backend's destroy (shutdown step, grace, kill, remove), then its
 * warm pool record, its Redis user(s), its footprint (freeSandboxFootprint) and its volume holds
 * (after the backend's destroy: the volume is unmounted by then). Every destroy
 * calls it: pod-lifecycle's `destroySandbox` (the `sandbox-destroy` queue, the run teardown),
 * start failures, the warm pools, and the reaper for orphans. Idempotent: a repeat converges.
 * Job state and slot leases are not its business (the caller's: pod-lifecycle's destroy).
 * A pause is the same teardown with `keepFiles`: its files are kept first, then all else goes.
 */
export async function tearDownSandbox(deps: SandboxTeardownDeps, what: SandboxTeardown): Promise<void> {
  const { jobId, ref, member } = what;
  if (ref && what.keepFiles) await what.keepFiles(ref);
  if (ref) {
    // A claimed member's agent reads the job's keys, not the member's the backend knows of:
    // ask it to leave there, so the backend's grace ends when it has.
    if (member && member !== jobId)
      await deps.redis.lpush(deps.keys.sandbox(jobId).in, JSON.stringify(newShutdownStep()));
    await deps.backend.destroy(ref, { graceMs: what.graceMs });
  }
  const ids = member && member !== jobId ? [jobId, member] : [jobId];
  if (member) {
    const record = await deps.pools?.get(member);
    if (record) await deps.pools?.remove(record);
  }
  for (const id of ids) {
    if (!what.keepVolumeHolds) await new VolumeStore(deps.redis, deps.keys).release(id);
    if (deps.acl) await deps.acl.delete(id);
    await freeSandboxFootprint(deps.redis, deps.keys, id, {
      // A member's own keys hold nothing of the job's.
      keepOutput: what.keepOutput && id === jobId,
      keepPreview: what.keepPreview === true || what.keepFiles !== undefined,
      ...what.scan,
    });
  }
}

/** How long a teardown claim outlives its taking: past any teardown (grace, kill, key walk). */
export const TEARDOWN_CLAIM_MS = 60_000;

/**
 * The key that says a sandbox's teardown is taken, named by the backend's id of it (a claimed warm
 * pool member's own id). pod-lifecycle's destroy sets it before it tears down; the reaper takes
 * it with NX before tearing down an orphan and leaves the sandbox alone when it is set: with a
 * short sandbox grace the reaper otherwise sees each finished job's sandbox while pod-lifecycle is
 * destroying it and does the whole teardown again (docs/benchmarks.md). It is never deleted, only
 * expires: a reaper pass that listed the sandbox just before it went still finds it set.
 */
export function teardownClaimKey(keys: KeySpace, sandboxJobId: string): string {
  return keys.lock(`sandbox-teardown:${sandboxJobId}`);
}
