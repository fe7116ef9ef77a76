import { z } from 'zod';
import type { JobRecord, JobSandbox } from './job-state.js';
import { type LiveSandboxSpec, LiveSandboxSpecSchema } from './live-sandbox-spec.js';
import { isRedisRateReason } from './sandbox-redis-rate.js';
import { isRedisBudgetReason } from './sandbox-redis-usage.js';

/**
 * A live sandbox as its users see it. It is stored as a job record (one pipeline serves both),
 * and this is the one place that reads a record as a sandbox:
 *
 *   queued → creating → ready → closing → closed, or failed
 *                        ready → pausing → paused → (resume) queued → creating → ready …
 *
 * queued = waiting for a slot; creating = admitted, its backend starting it; ready = its agent
 * is alive and takes commands; closing = a close was asked and the services are ending it;
 * pausing = a pause was asked (or its idle pause decided): it takes no more commands while its
 * files are kept and its sandbox goes; paused = it holds no slot and no sandbox, only its id,
 * spec, labels, env and files, until it resumes, is closed, or its paused retention runs out.
 */
export const SandboxStateSchema = z.enum([
  'queued',
  'creating',
  'ready',
  'pausing',
  'paused',
  'closing',
  'closed',
  'failed',
]);
export type SandboxState = z.infer<typeof SandboxStateSchema>;

/** Why a sandbox is closed or failed. */
export const SandboxEndReasonSchema = z.enum([
  'user',
  'idle',
  'lifetime',
  'start-failed',
  'sandbox-lost',
  'redis-budget',
  'redis-rate',
  'disk-budget',
  /** It stayed paused past its `pausedRetentionSeconds` (or the operator's cap): the reaper closed it. */
  'paused-expired',
  /** Its pause could not keep its files (written by pod-lifecycle: `pause failed: …`). */
  'pause-failed',
]);
export type SandboxEndReason = z.infer<typeof SandboxEndReasonSchema>;

/**
 * The reasons the step-dispatcher writes when it closes a ready sandbox (the record's `reason`);
 * a close asked by a client carries `user` from the start.
 */
export const SandboxCloseReason = { user: 'user', idle: 'idle', lifetime: 'lifetime' } as const;

/**
 * The record's `closing` value while a pause is under way (asked by a client, or decided by the
 * idle check of a sandbox whose spec says `onIdle: 'pause'`): it refuses commands as a closing
 * sandbox does, and reads as `pausing`.
 */
export const SANDBOX_PAUSE_MARK = 'pause';

/** The reason a paused sandbox's end carries when the reaper closes it past its retention. */
export const PAUSED_EXPIRED_REASON = 'paused-expired';

export interface SandboxRecord {
  id: string;
  tenant: string;
  labels: Record<string, string>;
  state: SandboxState;
  /** Set once closed or failed. */
  reason: SandboxEndReason | undefined;
  /** The operator-facing message of a failure ("image not found: …", "agent stopped heart-beating"). */
  message: string | undefined;
  spec: LiveSandboxSpec;
  createdAt: number;
  readyAt: number | undefined;
  endedAt: number | undefined;
  lastActivityAt: number | undefined;
  commandsRunning: number;
  /** Where it runs (backend and its id), once created. */
  sandbox: JobSandbox | undefined;
  /** When it paused (epoch ms), while it is paused. */
  pausedAt: number | undefined;
  /** How many times it resumed. */
  resumes: number;
  /**
   * When it ends of its lifetime (epoch ms), once ready: ready + its `timeoutSeconds` (capped by
   * the operator), or what setTimeout made it.
   */
  endsAt: number | undefined;
}

/** The record as a sandbox, or null when it is a job's (or its spec is unreadable). */
export function sandboxRecordOf(job: JobRecord): SandboxRecord | null {
  if (job.kind !== 'sandbox') return null;
  const spec = LiveSandboxSpecSchema.safeParse(job.spec);
  if (!spec.success) return null;
  const { state, reason } = sandboxStateOf(job);
  return {
    id: job.id,
    tenant: job.tenant,
    labels: spec.data.labels,
    state,
    reason,
    message: state === 'failed' ? job.reason : undefined,
    spec: spec.data,
    createdAt: job.createdAt,
    readyAt: job.readyAt,
    endedAt: job.finishedAt,
    lastActivityAt: job.lastActivityAt,
    commandsRunning: job.commandsRunning,
    sandbox: job.sandbox,
    pausedAt: job.state === 'paused' ? job.pausedAt : undefined,
    resumes: job.resumes ?? 0,
    endsAt: job.state === 'running' ? job.endsAt : undefined,
  };
}

function sandboxStateOf(job: JobRecord): { state: SandboxState; reason: SandboxEndReason | undefined } {
  const closing = job.cancelRequested !== undefined || job.closing !== undefined;
  // A close asked during a pause wins: it reads closing.
  const pausing = job.cancelRequested === undefined && job.closing === SANDBOX_PAUSE_MARK;
  switch (job.state) {
    case 'queued':
      return { state: closing ? 'closing' : 'queued', reason: undefined };
    case 'scheduled':
    case 'starting':
      return { state: closing ? 'closing' : 'creating', reason: undefined };
    case 'running':
      // Running but not yet opened for commands by the dispatcher: still creating.
      if (pausing) return { state: 'pausing', reason: undefined };
      if (closing) return { state: 'closing', reason: undefined };
      return { state: job.readyAt === undefined ? 'creating' : 'ready', reason: undefined };
    case 'paused':
      if (job.cancelRequested !== undefined) return { state: 'closing', reason: undefined };
      // Paused once its files are kept and its sandbox gone (pod-lifecycle clears `sandbox` then).
      return { state: job.sandbox === undefined ? 'paused' : 'pausing', reason: undefined };
    case 'cancelled':
      return { state: 'closed', reason: 'user' };
    case 'timed-out':
      return {
        state: 'closed',
        reason: job.reason === PAUSED_EXPIRED_REASON ? 'paused-expired' : 'lifetime',
      };
    case 'succeeded': {
      const parsed = SandboxEndReasonSchema.safeParse(job.reason);
      return { state: 'closed', reason: parsed.success ? parsed.data : 'user' };
    }
    case 'failed':
      if (isRedisBudgetReason(job.reason)) return { state: 'failed', reason: 'redis-budget' };
      // Written by the dispatcher's rate monitor (redis-rate-stop.ts, redisRateReason).
      if (isRedisRateReason(job.reason)) return { state: 'failed', reason: 'redis-rate' };
      // Written by pod-lifecycle's disk budget (libs/sandbox disk-budget-watch.ts, diskBudgetReason).
      if (job.reason?.startsWith('disk-budget:')) return { state: 'failed', reason: 'disk-budget' };
      // Written by pod-lifecycle's pause teardown (destroy-sandbox.ts).
      if (job.reason?.startsWith('pause failed:')) return { state: 'failed', reason: 'pause-failed' };
      return { state: 'failed', reason: job.readyAt === undefined ? 'start-failed' : 'sandbox-lost' };
  }
}

/** The job states a sandbox state lists (for `list({ state })`). */
export function jobStatesOf(state: SandboxState): JobRecord['state'][] {
  switch (state) {
    case 'queued':
      return ['queued'];
    case 'creating':
      return ['scheduled', 'starting', 'running'];
    case 'ready':
    case 'pausing':
      return ['running', 'paused'];
    case 'paused':
      return ['paused'];
    case 'closing':
      return ['queued', 'scheduled', 'starting', 'running', 'paused'];
    case 'closed':
      return ['succeeded', 'cancelled', 'timed-out'];
    case 'failed':
      return ['failed'];
  }
}
