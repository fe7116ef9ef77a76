import { JobIdSchema, TraceContextSchema } from '@sandstream/wire';
import { z } from 'zod';
import { JobStateSchema } from './job-state.js';

/**
 * The BullMQ queues between the services. Every payload is zod-validated by its consumer
 * (a malformed payload fails that BullMQ job with the field named, it never crashes a worker),
 * and every payload may carry the W3C trace context of the job's trace.
 *
 *   submit ──jobs──▶ scheduler ──sandbox-create──▶ pod-lifecycle ──dispatch──▶ step-dispatcher
 *                                                       ▲                            │ ▲
 *                                                       └──────sandbox-destroy───────┘ │
 *   cancel (SDK, API) ──dispatch-cancel───────────────────────────────────────────────┘
 *
 * The job record (job-store) is the source of truth; payloads carry ids and only what the next
 * service needs so it does not have to re-read the record on the hot path.
 */
export const QueueNames = {
  jobs: 'jobs',
  sandboxCreate: 'sandbox-create',
  dispatch: 'dispatch',
  sandboxDestroy: 'sandbox-destroy',
  dispatchCancel: 'dispatch-cancel',
  /** SDK / API -> pod-lifecycle: capture or restore a sandbox's files (snapshot-requests.ts). */
  sandboxSnapshot: 'sandbox-snapshot',
  /** SDK / API -> pod-lifecycle: change a running sandbox's egress policy (network-requests.ts). */
  sandboxNetwork: 'sandbox-network',
} as const;
export type QueueName = (typeof QueueNames)[keyof typeof QueueNames];

/**
 * How long an idle BullMQ worker blocks on its queue's marker (`BZPOPMIN`) before it looks again
 * (`drainDelay`, seconds). A job added wakes it at once through the marker, and close() drops the
 * blocking connection rather than wait for the block, so the length costs neither latency nor
 * shutdown time; each timeout costs a round trip and a `moveToActive` script. At BullMQ's default
 * of 5 s, the seven workers of an idle stack made ~3 commands a second between them, most of an
 * idle service's CPU (issue 32 §3, docs/benchmarks.md). The price: a blocking connection that dies
 * without a reset (a silent network partition) is noticed after this plus a second.
 */
export const WORKER_DRAIN_DELAY_SECONDS = 30;

const traceContext = TraceContextSchema.optional();

/** submit -> scheduler. The spec itself is read from the job record. */
export const JobsPayloadSchema = z.object({
  jobId: JobIdSchema,
  traceContext,
});
export type JobsPayload = z.infer<typeof JobsPayloadSchema>;

/** The sandbox ref as backends return it (libs/sandbox SandboxRef). */
export const SandboxRefPayloadSchema = z.object({
  jobId: JobIdSchema,
  backend: z.enum(['inprocess', 'docker', 'kubernetes']),
  id: z.string().min(1),
});
export type SandboxRefPayload = z.infer<typeof SandboxRefPayloadSchema>;

/**
 * scheduler -> pod-lifecycle. `sandbox` is the resolved SandboxSpec input (libs/sandbox
 * SandboxSpecSchema parses it in pod-lifecycle; kept loose here so the bus does not depend on
 * the backends package).
 */
export const SandboxCreatePayloadSchema = z.object({
  jobId: JobIdSchema,
  tenant: z.string().min(1),
  sandbox: z.looseObject({ image: z.string().min(1) }),
  /** Template name it was resolved from, for logs. */
  template: z.string().optional(),
  /** A live sandbox: its agent waits for commands however long its client thinks (no idle exit of its own). */
  live: z.boolean().optional(),
  traceContext,
});
export type SandboxCreatePayload = z.infer<typeof SandboxCreatePayloadSchema>;

/** pod-lifecycle -> step-dispatcher: the sandbox's agent is alive; start pushing steps. */
export const DispatchPayloadSchema = z.object({
  jobId: JobIdSchema,
  sandbox: SandboxRefPayloadSchema,
  /** Completion stream this job's agent notifies (key-space completionStream(shard)). */
  notifyStream: z.string().min(1),
  traceContext,
});
export type DispatchPayload = z.infer<typeof DispatchPayloadSchema>;

/** step-dispatcher (or anyone ending a job) -> pod-lifecycle: tear the sandbox down. */
export const SandboxDestroyPayloadSchema = z.object({
  jobId: JobIdSchema,
  /** Why, for logs ("job succeeded", "cancelled by user", …). */
  reason: z.string().max(2048).default('job finished'),
  /** The terminal state the sender recorded (or will record); informational. */
  outcome: JobStateSchema.optional(),
  traceContext,
});
export type SandboxDestroyPayload = z.infer<typeof SandboxDestroyPayloadSchema>;

/**
 * SDK / API -> step-dispatcher: a cancel was recorded on the job (job-store requestCancel) and
 * the job has, or is getting, a sandbox. The dispatcher owns the rest: it signals the agent's
 * running step and leaves the backstop deadline (docs/step-dispatcher.md, "Cancel").
 */
export const CancelRequestPayloadSchema = z.object({
  jobId: JobIdSchema,
  reason: z.string().max(1024),
  /**
   * A live sandbox's pause rather than its close (sandbox-pause.ts): the dispatcher ends it
   * `paused`, and its destroy keeps its files.
   */
  pause: z.boolean().optional(),
  /**
   * Not a cancel: a client moved the sandbox's end (sandbox-timeout.ts); the dispatcher moves
   * its lifetime deadline to the record's `endsAt`.
   */
  lifetime: z.boolean().optional(),
  traceContext,
});
export type CancelRequestPayload = z.infer<typeof CancelRequestPayloadSchema>;

/**
 * BullMQ custom ids may not contain ":" nor look like integers, but job ids may; this maps a
 * job id to a BullMQ job id reversibly ("%" never occurs in a job id). Using it as the BullMQ
 * jobId makes every queue idempotent per job: adding the same job twice adds it once. `resumes`:
 * the life of a live sandbox that paused and resumed (JobField.resumes).
 */
export function bullJobId(jobId: string, resumes = 0): string {
  const base = `j_${jobId.replaceAll(':', '%3A')}`;
  // A resumed sandbox's later lives: BullMQ keeps an earlier life's entries (completed, for an
  // hour) under the plain id, and would swallow a new add under it.
  return resumes > 0 ? `${base}%r${resumes}` : base;
}

/** Default BullMQ job options per queue: bounded history so Redis does not grow with every job. */
export const DefaultJobOptions = {
  removeOnComplete: { age: 3600, count: 10_000 },
  removeOnFail: { age: 24 * 3600, count: 10_000 },
} as const;

/**
 * Job spec priority (1 lowest … 100 most urgent) as a BullMQ priority (1 served first … 100
 * last). Every job gets a priority, because BullMQ serves jobs without one before all others.
 */
export function bullPriority(priority: number): number {
  return 101 - Math.min(100, Math.max(1, Math.round(priority)));
}
