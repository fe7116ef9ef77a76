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
 *
 * queued = waiting for a slot; creating = admitted, its backend starting it; ready = its agent
 * is alive and takes commands; closing = a close was asked and the services are ending it.
 */
export const SandboxStateSchema = z.enum(['queued', 'creating', 'ready', 'closing', 'closed', 'failed']);
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
]);
export type SandboxEndReason = z.infer<typeof SandboxEndReasonSchema>;

/**
 * The reasons the step-dispatcher writes when it closes a ready sandbox (the record's `reason`);
 * a close asked by a client carries `user` from the start.
 */
export const SandboxCloseReason = { user: 'user', idle: 'idle', lifetime: 'lifetime' } as const;

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
  };
}

function sandboxStateOf(job: JobRecord): { state: SandboxState; reason: SandboxEndReason | undefined } {
  const closing = job.cancelRequested !== undefined || job.closing !== undefined;
  switch (job.state) {
    case 'queued':
      return { state: closing ? 'closing' : 'queued', reason: undefined };
    case 'scheduled':
    case 'starting':
      return { state: closing ? 'closing' : 'creating', reason: undefined };
    case 'running':
      // Running but not yet opened for commands by the dispatcher: still creating.
      if (closing) return { state: 'closing', reason: undefined };
      return { state: job.readyAt === undefined ? 'creating' : 'ready', reason: undefined };
    case 'cancelled':
      return { state: 'closed', reason: 'user' };
    case 'timed-out':
      return { state: 'closed', reason: 'lifetime' };
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
    case 'closing':
      return ['queued', 'scheduled', 'starting', 'running'];
    case 'closed':
      return ['succeeded', 'cancelled', 'timed-out'];
    case 'failed':
      return ['failed'];
  }
}
