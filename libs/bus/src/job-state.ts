import { JobIdSchema, type StepResultSchema } from '@sandstream/wire';
import { z } from 'zod';

/**
 * queued ─▶ scheduled ─▶ starting ─▶ running ─▶ succeeded | failed | cancelled | timed-out
 *
 * Any non-terminal state may also end in failed / cancelled / timed-out (a start failure, a
 * cancel before the sandbox exists, a deadline while queued). Terminal states never change.
 *
 * A live sandbox may also pause: running ─▶ paused ─▶ queued (resume: admitted and started again
 * under the same id, from the files it kept). A paused sandbox holds no slot and no sandbox; it
 * is not terminal (its id stays taken), and ends cancelled (closed while paused) or timed-out
 * (its paused retention ran out: the reaper).
 */
export const JobStateSchema = z.enum([
  'queued',
  'scheduled',
  'starting',
  'running',
  'paused',
  'succeeded',
  'failed',
  'cancelled',
  'timed-out',
]);
export type JobState = z.infer<typeof JobStateSchema>;

export const TERMINAL_STATES: readonly JobState[] = ['succeeded', 'failed', 'cancelled', 'timed-out'];

export function isTerminal(state: JobState): boolean {
  return TERMINAL_STATES.includes(state);
}

/**
 * Which state may follow which. Enforced by the job-store's transition script (job-layout.ts
 * hands this table to Lua), so a caller that names a forbidden move fails loudly instead of
 * corrupting the record; docs/services.md says which service owns each move.
 */
export const JOB_TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  queued: ['scheduled', 'failed', 'cancelled', 'timed-out'],
  scheduled: ['starting', 'queued', 'failed', 'cancelled', 'timed-out'],
  starting: ['running', 'failed', 'cancelled', 'timed-out'],
  running: ['succeeded', 'failed', 'cancelled', 'timed-out', 'paused'],
  paused: ['queued', 'failed', 'cancelled', 'timed-out'],
  succeeded: [],
  failed: [],
  cancelled: [],
  'timed-out': [],
};

/** Where the sandbox of a job lives, once pod-lifecycle created it. */
/** How a sandbox came to be: claimed from a warm pool, or started cold (and why not warm). */
export const SandboxStartSchema = z.object({
  kind: z.enum(['warm', 'cold']),
  /** Cold: why no warm member served it (`no-pool`, `empty`, `spec-differs: image`, …). */
  reason: z.string().max(1024).optional(),
});
export type SandboxStart = z.infer<typeof SandboxStartSchema>;

export const JobSandboxSchema = z.object({
  backend: z.enum(['inprocess', 'docker', 'kubernetes']),
  id: z.string(),
  /**
   * A warm pool member's id: the backend knows the sandbox by it (its labels, its directory),
   * so a destroy passes it instead of the job's id.
   */
  member: z.string().optional(),
  start: SandboxStartSchema.optional(),
  /**
   * Where the services reach the sandbox's ports (backend portAddress): a container's or pod's
   * IP, or the loopback; services/api's preview proxy connects there.
   */
  host: z.string().max(253).optional(),
});
export type JobSandbox = z.infer<typeof JobSandboxSchema>;

/**
 * How to name a job's sandbox to its backend: by the job's id, or, for a sandbox claimed from a
 * warm pool, by the member's id it was made under.
 */
export function sandboxRefOf(
  jobId: string,
  sandbox: JobSandbox,
): { jobId: string; backend: JobSandbox['backend']; id: string } {
  return { jobId: sandbox.member ?? jobId, backend: sandbox.backend, id: sandbox.id };
}

/**
 * One entry on the job's own events stream (field `job`) and on `events:lifecycle`.
 * A follower of `sandbox:{jobId}:events` sees these beside the agent's `event` entries.
 */
/**
 * A long create phase advancing (pod-lifecycle, from its backend): an image being pulled onto the
 * node. Summed over the image's layers; the last one of a phase has `done`.
 */
export const CreateProgressSchema = z.object({
  phase: z.enum(['image-pull']),
  image: z.string(),
  layers: z.number().int().nonnegative(),
  layersDone: z.number().int().nonnegative(),
  downloadedBytes: z.number().int().nonnegative(),
  totalBytes: z.number().int().nonnegative(),
  done: z.boolean(),
});
export type CreateProgress = z.infer<typeof CreateProgressSchema>;

export const JobEventSchema = z.object({
  /** `progress`: from and to are both `starting`; `progress` says how far, `reason` in words. */
  type: z.enum(['created', 'transition', 'cancel-requested', 'progress']),
  jobId: JobIdSchema,
  tenant: z.string(),
  from: JobStateSchema.nullable(),
  to: JobStateSchema,
  /** Operator-facing reason ("image not found: …", "step step-2 exited 1"). */
  reason: z.string().optional(),
  at: z.number().int(),
  progress: CreateProgressSchema.optional(),
});
export type JobEvent = z.infer<typeof JobEventSchema>;

/** The stream field holding a JobEvent's JSON (the agent's entries use `event`). */
export const JOB_EVENT_FIELD = 'job';

/**
 * The stream field of the entry the step-dispatcher appends to a live sandbox's events stream
 * when it opens it for commands (its value: `readyAt`). Only a wake-up for whoever waits for the
 * sandbox to be ready (the SDK's readiness wait), who then reads the record: the stream is the
 * sandbox's to write as well, so the entry proves nothing by itself. Followers skip it (it is
 * neither an agent `event` nor a `job` entry).
 */
export const READY_MARK_FIELD = 'ready';

/** Whether a stream entry claims to be a JobEvent (whoever wrote it: see vouchedEntries in the SDK). */
export function hasJobEventField(fields: readonly string[]): boolean {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === JOB_EVENT_FIELD) return true;
  return false;
}

export function decodeJobEventFields(fields: readonly string[]): JobEvent | null {
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== JOB_EVENT_FIELD) continue;
    try {
      const parsed = JobEventSchema.safeParse(JSON.parse(fields[i + 1] as string));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }
  return null;
}

/** A sandbox's disk use against its limit, as last measured (docs/sandbox-backends.md, "Disk"). */
export const JobDiskSchema = z.object({
  usedBytes: z.number().int().nonnegative(),
  limitBytes: z.number().int().positive(),
  /** Epoch ms of the measure. */
  measuredAt: z.number().int(),
});
export type JobDisk = z.infer<typeof JobDiskSchema>;

/** The job record as job-store returns it (stored as a Redis hash `job:{id}`). */
export interface JobRecord {
  id: string;
  tenant: string;
  state: JobState;
  /** The parsed JobSpec (JSON as stored). */
  spec: unknown;
  createdAt: number;
  updatedAt: number;
  /** When the job reached a terminal state. */
  finishedAt: number | undefined;
  /** The reason given with the latest transition. */
  reason: string | undefined;
  /** Set when someone asked to cancel; the value is their reason. */
  cancelRequested: string | undefined;
  sandbox: JobSandbox | undefined;
  /** StepResults recorded so far, by stepId. */
  stepResults: Record<string, z.infer<typeof StepResultSchema>>;
  /** Grows by one with every change; handy for tests and optimistic readers. */
  version: number;
  /** `sandbox` for a live sandbox, driven command by command; `job` for declared steps. */
  kind: 'job' | 'sandbox';
  /** Live sandboxes: when it became ready for commands. */
  readyAt: number | undefined;
  /** Live sandboxes: the last client call, epoch ms. */
  lastActivityAt: number | undefined;
  /** Live sandboxes: commands pushed whose result is not recorded yet. */
  commandsRunning: number;
  /** Live sandboxes: commands handed out since it opened. */
  commandSeq: number;
  /** Live sandboxes: why the dispatcher is closing it (idle, lifetime), once it decided to. */
  closing: string | undefined;
  /** Live sandboxes: the commands still in its bounded history, by id (CommandRecord JSON as stored). */
  commands: Record<string, unknown>;
  /** The namespace that created it (JobField.namespace); undefined on records older than the field. */
  namespace?: string | undefined;
  /** The sandbox's disk use and limit, where its backend's owner measures them (Docker, in-process). */
  disk: JobDisk | undefined;
  /** Live sandboxes: when it paused, while it is paused. */
  pausedAt?: number | undefined;
  /** Live sandboxes: how many times it resumed (0 on its first life). */
  resumes?: number;
  /** Live sandboxes: the files keeper's reference to what it kept at its pause. */
  pausedFiles?: string | undefined;
  /** Live sandboxes: why this life of it cannot pause, if it cannot. */
  unpausable?: string | undefined;
  /** Live sandboxes: when this life of it ends (its lifetime deadline, moved by setTimeout), epoch ms. */
  endsAt?: number | undefined;
  /** Live sandboxes: the latest endsAt may be (ready + the operator's maximum lifetime), epoch ms. */
  maxEndsAt?: number | undefined;
}
