// The API's answers as the console reads them: the fields it shows of the OpenAPI document's
// Job, Sandbox, StepResult and TimelineEvent (/openapi.json; services/api/src/schemas.ts and
// sse-schemas.ts are their zod sources). The console is a browser bundle and carries no zod:
// what the libs own comes in by `import type` only, erased at build, so no node code (ioredis)
// reaches the bundle.
import type { JobState, SandboxState, TemplateInfo } from '@sandstream/bus';
import type { FollowItem } from '@sandstream/client';

export type { JobState, SandboxState };

// Runtime values stay here (importing them would bundle the bus); the check at the end keeps the list whole.
export const JOB_STATES = [
  'queued',
  'scheduled',
  'starting',
  'running',
  'paused',
  'succeeded',
  'failed',
  'cancelled',
  'timed-out',
] as const satisfies readonly JobState[];

export const TERMINAL_STATES: readonly JobState[] = ['succeeded', 'failed', 'cancelled', 'timed-out'];

export interface StepResult {
  stepId: string | null;
  exitCode: number | null;
  durationSeconds: number;
  errorMessage: string | null;
  timedOut: boolean;
  cancelled?: boolean;
}

export interface JobSandbox {
  backend: string;
  id: string;
  start?: { kind: 'warm' | 'cold'; reason?: string };
}

export interface JobSpecView {
  template?: string;
  image?: string;
  steps?: { id?: string; kind?: string; argv?: string[]; command?: string }[];
}

export interface Job {
  id: string;
  kind: 'job' | 'sandbox';
  tenant: string;
  state: JobState;
  spec: JobSpecView | null;
  createdAt: number;
  updatedAt: number;
  finishedAt?: number;
  readyAt?: number;
  reason?: string;
  cancelRequested?: string;
  sandbox?: JobSandbox;
  stepResults: Record<string, StepResult>;
}

export interface Sandbox {
  id: string;
  tenant: string;
  labels: Record<string, string>;
  state: SandboxState;
  reason?: string;
  message?: string;
  spec: Record<string, unknown>;
  createdAt: number;
  readyAt?: number;
  endedAt?: number;
  lastActivityAt?: number;
  commandsRunning: number;
  resumes: number;
  endsAt?: number;
  sandbox?: JobSandbox;
}

export interface Stats {
  cpuSeconds: number | null;
  memoryBytes: number | null;
  memoryLimitBytes: number | null;
  workspaceBytes: number;
  workspaceFiles: number;
  diskBytes: number | null;
  commandsRun: number;
  commandsRunning: number;
  outputLines: number;
}

export interface FileEntry {
  /** Relative to the listed directory. */
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  sizeBytes: number;
}

/** A command of a sandbox's history, and a background process (the same record). */
export interface HistoryEntry {
  id: string;
  kind: string;
  command?: string;
  args?: string[];
  path?: string;
  background?: boolean;
  terminal?: string;
  startedAt: number;
  result?: StepResult;
}

export interface PoolFigures {
  template: string;
  min: number;
  max: number;
  tenants?: string[];
  starting: number;
  ready: number;
  /** Warm claims that took a ready member, and ones that fell back to a cold start. */
  hits: number;
  misses: number;
}

export interface QueueFigures {
  name: string;
  waiting: number;
  active: number;
  delayed: number;
  prioritized: number;
  completed: number;
  failed: number;
}

export interface Templates {
  /** The file's and the built ones: a name both have is listed twice, the built one shadowed. */
  templates: TemplateInfo[];
  default: { template?: string; image?: string };
}

/** One event of a job's or sandbox's timeline stream (GET …/events): the client's FollowItem. */
export type TimelineItem = FollowItem;

/** A ready snapshot as GET /v1/sandboxes/:id/snapshots lists it (newest first). */
export interface SnapshotSummary {
  snapshotId: string;
  name?: string;
  sizeBytes: number;
}

/** What POST /v1/sandboxes/:id/restore answers. */
export interface RestoreResult {
  snapshotId: string;
  stoppedCommands: string[];
  entries: number;
  bytes: number;
}

// Fails to type-check when the bus gains a job state the console's list lacks.
type MissingJobState = Exclude<JobState, (typeof JOB_STATES)[number]>;
const allJobStatesListed: [MissingJobState] extends [never] ? true : false = true;
void allJobStatesListed;
