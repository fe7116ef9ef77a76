// The API's answers as the console reads them: the fields it shows of the OpenAPI document's
// Job, Sandbox, StepResult and TimelineEvent (/openapi.json; services/api/src/schemas.ts and
// sse-schemas.ts are their zod sources). The console is a browser bundle and carries no zod.

export type JobState =
  | 'queued'
  | 'scheduled'
  | 'starting'
  | 'running'
  | 'paused'
  | 'succeeded'
  | 'failed'
  | 'cancelled'
  | 'timed-out';

export const JOB_STATES: readonly JobState[] = [
  'queued',
  'scheduled',
  'starting',
  'running',
  'paused',
  'succeeded',
  'failed',
  'cancelled',
  'timed-out',
];

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

export type SandboxState =
  | 'queued'
  | 'creating'
  | 'ready'
  | 'pausing'
  | 'paused'
  | 'closing'
  | 'closed'
  | 'failed';

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
  templates: { name: string; image?: string }[];
  default: { template?: string; image?: string };
}

/** One event of a job's or sandbox's timeline stream (GET …/events). */
export type TimelineItem =
  | { type: 'state'; cursor: string; from: JobState | null; to: JobState; reason?: string; terminal: boolean }
  | { type: 'cancel-requested'; cursor: string; reason?: string }
  | { type: 'step-started'; cursor: string; stepId: string }
  | { type: 'output'; cursor: string; stepId: string; stream: 'stdout' | 'stderr'; line: string; seq: number }
  | { type: 'gap'; cursor: string; stepId: string; from: number; to: number; startTrimmed?: boolean }
  | {
      type: 'step-completed';
      cursor: string;
      stepId: string;
      exitCode: number | null;
      droppedLines: number;
      seq: number;
    };

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
