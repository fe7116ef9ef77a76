import { StepResultSchema } from '@sandstream/wire';
import {
  JOB_EVENT_FIELD,
  JOB_TRANSITIONS,
  JobDiskSchema,
  type JobRecord,
  JobSandboxSchema,
  JobStateSchema,
  READY_MARK_FIELD,
  TERMINAL_STATES,
} from './job-state.js';

/**
 * The layout of the job record hash `job:{<jobId>}`: its field names and how a hash reads back
 * as a JobRecord. The one place that knows it; Lua scripts of any package get the same names
 * and the state sets through the generated include `job-layout` (jobLayoutLua), and the
 * functions of `includes/job-record.lua` that use them.
 */
export const JobField = {
  id: 'id',
  tenant: 'tenant',
  state: 'state',
  spec: 'spec',
  createdAt: 'createdAt',
  updatedAt: 'updatedAt',
  finishedAt: 'finishedAt',
  reason: 'reason',
  cancelRequested: 'cancelRequested',
  sandbox: 'sandbox',
  /** The sandbox's Redis user, to re-create it after a restart (sandbox-user-record.ts). */
  sandboxUser: 'sandboxUser',
  version: 'version',
  /** `sandbox` for a live sandbox (live-sandbox-spec.ts); absent for a job. */
  kind: 'kind',
  /** Live sandboxes: when the dispatcher opened it for commands (it became ready). */
  readyAt: 'readyAt',
  /** Live sandboxes: the last client call (exec, file operation, keepAlive), epoch ms. */
  lastActivityAt: 'lastActivityAt',
  /** Live sandboxes: the number of the last command id handed out. */
  commandSeq: 'commandSeq',
  /** Live sandboxes: commands pushed whose result is not recorded yet. */
  commandsRunning: 'commandsRunning',
  /** Live sandboxes: the dispatcher decided to close it (idle, lifetime); takes no more commands. */
  closing: 'closing',
  /**
   * The SANDSTREAM_NAMESPACE that created the job. `job:{<id>}` itself carries no namespace (the
   * per-job keys are the wire's), so this field is how a reaper tells its own jobs from another
   * namespace's on a shared Redis. Absent on records written before it existed.
   */
  namespace: 'namespace',
  /** The sandbox's disk use and limit as pod-lifecycle's disk budget last measured them (JobDisk JSON). */
  disk: 'disk',
  /** Live sandboxes: when it was paused (epoch ms); cleared when it resumes. */
  pausedAt: 'pausedAt',
  /**
   * Live sandboxes: how many times it resumed. Each life of the sandbox queues its work under
   * BullMQ ids of its own (bullJobId), since the ids of an earlier life stay taken for a while.
   */
  resumes: 'resumes',
  /** Live sandboxes: where its files were kept when it paused (the files keeper's reference). */
  pausedFiles: 'pausedFiles',
  /**
   * Live sandboxes: why this life of it cannot pause (its backend cannot capture its files, no
   * snapshot store), written by pod-lifecycle when it starts it, so a pause is refused up front
   * rather than fail the sandbox half-way.
   */
  unpausable: 'unpausable',
  /**
   * Live sandboxes: when this life of it ends (epoch ms): ready + its lifetime, written by the
   * step-dispatcher when it opens it, moved by a client's setTimeout (sandbox-timeout.ts).
   */
  endsAt: 'endsAt',
  /** Live sandboxes: the latest `endsAt` may be, ready + the operator's maximum lifetime. */
  maxEndsAt: 'maxEndsAt',
} as const;

/** A live sandbox's command, as pushed (its request and start time) is kept under `cmd:<id>`. */
const COMMAND_PREFIX = 'cmd:';

/**
 * Each JobEvent a service appended to the job's events stream is kept under `ev:<entryId>` too:
 * the stream is also the sandbox's to write, the record is not, so a follower believes a `job`
 * entry only when the record holds it under that entry's id (docs/wire.md, "Who may say what").
 */
const JOB_EVENT_PREFIX = 'ev:';

export function jobEventField(entryId: string): string {
  return `${JOB_EVENT_PREFIX}${entryId}`;
}

/** One StepResult per step is kept under `step:<stepId>`. */
const STEP_RESULT_PREFIX = 'step:';

export function stepResultField(stepId: string): string {
  return `${STEP_RESULT_PREFIX}${stepId}`;
}

export function parseJobRecord(hash: Record<string, string>): JobRecord | null {
  const id = hash?.[JobField.id];
  if (!hash || hash[JobField.state] === undefined || id === undefined) return null;
  const state = JobStateSchema.safeParse(hash[JobField.state]);
  if (!state.success) return null;
  const stepResults: JobRecord['stepResults'] = {};
  const commands: JobRecord['commands'] = {};
  for (const [field, value] of Object.entries(hash)) {
    if (field.startsWith(COMMAND_PREFIX)) {
      commands[field.slice(COMMAND_PREFIX.length)] = safeJson(value);
      continue;
    }
    if (!field.startsWith(STEP_RESULT_PREFIX)) continue;
    const parsed = StepResultSchema.safeParse(safeJson(value));
    if (parsed.success) stepResults[field.slice(STEP_RESULT_PREFIX.length)] = parsed.data;
  }
  const optionalNumber = (field: string) => (hash[field] ? Number(hash[field]) : undefined);
  const rawSandbox = hash[JobField.sandbox];
  const sandbox = rawSandbox ? JobSandboxSchema.safeParse(safeJson(rawSandbox)) : undefined;
  const finishedAt = hash[JobField.finishedAt];
  return {
    id,
    tenant: hash[JobField.tenant] ?? 'default',
    state: state.data,
    spec: safeJson(hash[JobField.spec] ?? 'null'),
    createdAt: Number(hash[JobField.createdAt]),
    updatedAt: Number(hash[JobField.updatedAt]),
    finishedAt: finishedAt ? Number(finishedAt) : undefined,
    reason: hash[JobField.reason],
    cancelRequested: hash[JobField.cancelRequested],
    sandbox: sandbox?.success ? sandbox.data : undefined,
    stepResults,
    version: Number(hash[JobField.version] ?? 0),
    kind: hash[JobField.kind] === 'sandbox' ? 'sandbox' : 'job',
    readyAt: optionalNumber(JobField.readyAt),
    lastActivityAt: optionalNumber(JobField.lastActivityAt),
    commandsRunning: Math.max(0, Number(hash[JobField.commandsRunning] ?? 0)),
    commandSeq: Number(hash[JobField.commandSeq] ?? 0),
    closing: hash[JobField.closing],
    namespace: hash[JobField.namespace],
    commands,
    disk: parseDisk(hash[JobField.disk]),
    pausedAt: optionalNumber(JobField.pausedAt),
    resumes: Number(hash[JobField.resumes] ?? 0),
    pausedFiles: hash[JobField.pausedFiles],
    unpausable: hash[JobField.unpausable],
    endsAt: optionalNumber(JobField.endsAt),
    maxEndsAt: optionalNumber(JobField.maxEndsAt),
  };
}

function parseDisk(raw: string | undefined): JobRecord['disk'] {
  const parsed = JobDiskSchema.safeParse(raw ? safeJson(raw) : undefined);
  return parsed.success ? parsed.data : undefined;
}

/** A parsed StepResult as stored under its step's field, or undefined. */
export function parseStepResult(
  raw: string | null | undefined,
): JobRecord['stepResults'][string] | undefined {
  const parsed = StepResultSchema.safeParse(raw ? safeJson(raw) : undefined);
  return parsed.success ? parsed.data : undefined;
}

const luaString = (value: string) => JSON.stringify(value);
const luaSet = (values: readonly string[]) => `{${values.map((v) => `[${luaString(v)}] = true`).join(', ')}}`;

/**
 * The generated Lua include `job-layout`: `JOB` (field names, the step-result prefix and the
 * events-stream field), `TERMINAL` (the terminal states as a set) and `ALLOWED` (state -> set of
 * states that may follow), all from their TypeScript definitions.
 */
export function jobLayoutLua(): string {
  const fields = Object.entries(JobField).map(([name, field]) => `${name} = ${luaString(field)}`);
  fields.push(
    `stepResultPrefix = ${luaString(STEP_RESULT_PREFIX)}`,
    `commandPrefix = ${luaString(COMMAND_PREFIX)}`,
    `eventField = ${luaString(JOB_EVENT_FIELD)}`,
    `eventPrefix = ${luaString(JOB_EVENT_PREFIX)}`,
    `readyMarkField = ${luaString(READY_MARK_FIELD)}`,
  );
  const allowed = Object.entries(JOB_TRANSITIONS).map(([from, to]) => `[${luaString(from)}] = ${luaSet(to)}`);
  return [
    '-- generated from libs/bus/src/job-layout.ts and job-state.ts',
    `local JOB = {${fields.join(', ')}}`,
    `local TERMINAL = ${luaSet(TERMINAL_STATES)}`,
    `local ALLOWED = {${allowed.join(', ')}}`,
  ].join('\n');
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return null;
  }
}
