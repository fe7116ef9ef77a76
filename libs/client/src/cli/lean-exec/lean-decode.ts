import type { StepEvent, StepResult } from '@sandstream/wire';
import { STEP_ERROR_CODES } from '@sandstream/wire/lean';

/**
 * The lean `exec`'s decoders of the records it reads and writes, without zod: zod's classic
 * schemas and libs/wire's cost ~23 ms of start-up (docs/benchmarks.md, "CLI start-up, part 4").
 *
 * Each is a fast path that only ever says "valid, and this is the value the schema gives" or
 * "not sure" (undefined): a record it is not sure of goes to the schema itself (full-decoders.ts,
 * loaded on that first use), so the lean CLI accepts and refuses exactly what the full one does.
 * lean-decode.test.ts feeds both the same records, valid and invalid, and holds them equal.
 */

/** Wire constants, copied rather than imported (libs/wire's index builds every schema); the test holds them equal. */
export const LEAN_LIMITS = {
  schemaVersion: 1,
  messageMaxBytes: 16 * 1024 * 1024,
  runMaxArgs: 10_000,
  runMaxTimeoutSeconds: 24 * 60 * 60,
  runDefaultTimeoutSeconds: 600,
  historyLimit: 200,
  maxRunningCommands: 64,
} as const;

export const TERMINAL_JOB_STATES: readonly string[] = ['succeeded', 'failed', 'cancelled', 'timed-out'];

const ERROR_CODES: readonly string[] = STEP_ERROR_CODES;
/** A command's event kinds; `result` (a code cell's) is left to the schema: exec never meets it. */
const EVENT_KINDS: readonly string[] = ['started', 'stdout', 'stderr', 'completed'];

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
const isCount = (v: unknown): v is number => isInt(v) && v >= 0;
const has = (o: Json, key: string) => Object.hasOwn(o, key);

/** StepResultSchema's fast path. Results with structured `output` (never a run step's) are left to the schema. */
export function fastStepResult(v: unknown): StepResult | undefined {
  if (!isObject(v) || has(v, 'output')) return undefined;
  const { schemaVersion, stepId, exitCode, timedOut, durationSeconds, errorMessage } = v;
  if (schemaVersion !== LEAN_LIMITS.schemaVersion) return undefined;
  if (!(stepId === null || typeof stepId === 'string')) return undefined;
  if (!(exitCode === null || isInt(exitCode))) return undefined;
  if (typeof timedOut !== 'boolean') return undefined;
  if (typeof durationSeconds !== 'number' || !Number.isFinite(durationSeconds) || durationSeconds < 0)
    return undefined;
  if (!(errorMessage === null || typeof errorMessage === 'string')) return undefined;
  if (has(v, 'errorCode') && !ERROR_CODES.includes(v.errorCode as string)) return undefined;
  if (has(v, 'cancelled') && typeof v.cancelled !== 'boolean') return undefined;
  if (has(v, 'droppedLines') && !isCount(v.droppedLines)) return undefined;
  if (has(v, 'outputLines') && !isCount(v.outputLines)) return undefined;
  // The schema's key order, unknown keys left out (zod strips them).
  return {
    schemaVersion,
    stepId,
    exitCode,
    timedOut,
    durationSeconds,
    errorMessage,
    ...(has(v, 'errorCode') ? { errorCode: v.errorCode as StepResult['errorCode'] } : {}),
    ...(has(v, 'cancelled') ? { cancelled: v.cancelled as boolean } : {}),
    ...(has(v, 'droppedLines') ? { droppedLines: v.droppedLines as number } : {}),
    ...(has(v, 'outputLines') ? { outputLines: v.outputLines as number } : {}),
  } as StepResult;
}

/** StepEventSchema's fast path. */
export function fastStepEvent(v: unknown): StepEvent | undefined {
  if (!isObject(v)) return undefined;
  const { schemaVersion, stepId, kind, seq, timestamp } = v;
  if (schemaVersion !== LEAN_LIMITS.schemaVersion || typeof stepId !== 'string') return undefined;
  if (!EVENT_KINDS.includes(kind as string) || !isCount(seq) || typeof timestamp !== 'string')
    return undefined;
  if (has(v, 'line') && typeof v.line !== 'string') return undefined;
  if (has(v, 'exitCode') && !(v.exitCode === null || isInt(v.exitCode))) return undefined;
  if (has(v, 'droppedLines') && !isCount(v.droppedLines)) return undefined;
  let result: StepResult | undefined;
  if (has(v, 'result')) {
    result = fastStepResult(v.result);
    if (result === undefined) return undefined;
  }
  return {
    schemaVersion,
    stepId,
    kind,
    seq,
    ...(has(v, 'line') ? { line: v.line as string } : {}),
    timestamp,
    ...(has(v, 'exitCode') ? { exitCode: v.exitCode as number | null } : {}),
    ...(has(v, 'droppedLines') ? { droppedLines: v.droppedLines as number } : {}),
    ...(result ? { result } : {}),
  } as StepEvent;
}

/** Parsed JSON, or undefined when it is not JSON. */
export function jsonOf(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** The schemas themselves, for the records the fast paths are not sure of (full-decoders.ts). */
export interface FullDecoders {
  stepEvent(json: unknown): StepEvent | undefined;
  stepResult(json: unknown): StepResult | undefined;
  /** decodeJobEventFields(fields): whether it is a transition to a terminal state. */
  endsJob(fields: readonly string[]): boolean;
  /** The message SandboxClosedError gives for the sandbox whose record this is; undefined: not a sandbox. */
  closedMessage(sandboxId: string, hash: Record<string, string>): string | undefined;
}

export class LeanDecoders {
  private loaded: FullDecoders | undefined;
  constructor(private readonly loadFull: () => FullDecoders) {}

  get full(): FullDecoders {
    this.loaded ??= this.loadFull();
    return this.loaded;
  }

  /** decodeEventEntry: every `event` field that parses, in order. */
  eventEntry(fields: readonly string[]): StepEvent[] {
    const events: StepEvent[] = [];
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i] !== 'event') continue;
      const json = jsonOf(fields[i + 1] as string);
      if (json === undefined) continue;
      const event = fastStepEvent(json) ?? this.full.stepEvent(json);
      if (event) events.push(event);
    }
    return events;
  }

  stepResult(json: unknown): StepResult | undefined {
    return fastStepResult(json) ?? this.full.stepResult(json);
  }

  /**
   * Whether the entry is the job's transition to a terminal state. Only an entry whose first
   * `job` field says so can be one; that rare entry is confirmed by the schema.
   */
  endsJob(fields: readonly string[]): boolean {
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i] !== 'job') continue;
      const json = jsonOf(fields[i + 1] as string);
      if (!isObject(json) || json.type !== 'transition' || !TERMINAL_JOB_STATES.includes(json.to as string))
        return false;
      return this.full.endsJob(fields);
    }
    return false;
  }
}

/** LocalConnectionFileSchema's fast path (`npm start`'s local.json); undefined: let the full CLI read it. */
export function fastLocalFile(
  v: unknown,
): { redisUrl: string; namespace: string; pid: number; natsUrl?: string } | undefined {
  if (!isObject(v)) return undefined;
  const { redisUrl, namespace, pid, natsUrl } = v;
  if (typeof redisUrl !== 'string' || !/^rediss?:\/\//.test(redisUrl)) return undefined;
  if (typeof namespace !== 'string' || namespace.length < 1) return undefined;
  if (!isInt(pid) || pid <= 0) return undefined;
  if (has(v, 'natsUrl') && !(typeof natsUrl === 'string' && /^(nats|tls|wss?):\/\//.test(natsUrl)))
    return undefined;
  return { redisUrl, namespace, pid, ...(has(v, 'natsUrl') ? { natsUrl: natsUrl as string } : {}) };
}
