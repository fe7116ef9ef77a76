import type { CodeError, CodeResult } from './code.js';
import { CODE_LANGUAGES } from './code-languages.js';
import {
  attempt,
  bool,
  isObject,
  type Json,
  notSure,
  nullishNum,
  num,
  oneOf,
  optBool,
  optNum,
  put,
  str,
} from './fast-read.js';
import { SUPPORTED_SCHEMA_MAJORS } from './schema-major.js';
import { STEP_ERROR_CODES } from './step-error-codes.js';
import type { StepResult } from './step-result.js';

/**
 * StepResultSchema (step-result.ts) without zod: the check the agent makes of every result it
 * writes (its executors' outcomes are its own code, so a refusal is a bug there). Exact rather
 * than a fast path: what it refuses, the schema refuses too, and what it accepts comes out as the
 * schema gives it, unknown keys dropped (fast-step.test.ts holds it to the schema).
 */

const int = { int: true };
const count = { int: true, min: 0 };

/** A copy without undefined values: zod takes `key: undefined` as an absent optional key. */
function defined(value: unknown): Json {
  if (!isObject(value)) return notSure();
  const out: Json = {};
  for (const [key, item] of Object.entries(value)) if (item !== undefined) out[key] = item;
  return out;
}

function nullableString(o: Json, key: string): string | null {
  const value = o[key];
  return value === null || typeof value === 'string' ? value : notSure();
}

function array<T>(value: unknown, item: (o: Json) => T): T[] {
  return Array.isArray(value) ? value.map((entry: unknown) => item(defined(entry))) : notSure();
}

/** CodeResultSchema's output for `o` (throws NOT_SURE where it refuses): also the code runners' results. */
export function codeResult(o: Json): CodeResult {
  const out: Json = {};
  for (const key of ['text', 'html', 'markdown', 'png', 'svg']) {
    const value = o[key];
    if (value !== undefined) out[key] = typeof value === 'string' ? value : notSure();
  }
  put(out, 'json', o.json);
  out.isMainResult = bool(o, 'isMainResult');
  return out as unknown as CodeResult;
}

/** CodeErrorSchema's output for `o` (throws NOT_SURE where it refuses). */
export function codeError(o: Json): CodeError {
  return { name: str(o, 'name'), value: str(o, 'value'), traceback: str(o, 'traceback') };
}

const OUTPUTS: Record<string, (o: Json) => Json> = {
  readFile: (o) => ({
    path: str(o, 'path'),
    content: str(o, 'content'),
    sizeBytes: num(o, 'sizeBytes', int),
  }),
  writeFile: (o) => ({ path: str(o, 'path'), bytesWritten: num(o, 'bytesWritten', int) }),
  listFiles: (o) => ({
    path: str(o, 'path'),
    entries: array(o.entries, (e) => ({
      path: str(e, 'path'),
      type: oneOf(e, 'type', ['file', 'directory', 'symlink', 'other']) ?? notSure(),
      sizeBytes: num(e, 'sizeBytes', count),
    })),
    truncated: bool(o, 'truncated'),
  }),
  upload: (o) => ({ path: str(o, 'path'), bytes: num(o, 'bytes', int), files: num(o, 'files', int) }),
  download: (o) => ({ path: str(o, 'path'), bytes: num(o, 'bytes', int), files: num(o, 'files', int) }),
  stats: (o) => ({
    cpuSeconds: nullable(o, 'cpuSeconds', { min: 0 }),
    memoryBytes: nullable(o, 'memoryBytes', count),
    memoryLimitBytes: nullable(o, 'memoryLimitBytes', count),
    workspaceBytes: num(o, 'workspaceBytes', count),
    workspaceFiles: num(o, 'workspaceFiles', count),
    workspaceTruncated: bool(o, 'workspaceTruncated'),
  }),
  grep: (o) => ({
    matches: array(o.matches, (m) => ({
      path: str(m, 'path'),
      line: num(m, 'line', { int: true, positive: true }),
      column: num(m, 'column', { int: true, positive: true }),
      text: str(m, 'text'),
    })),
    truncated: bool(o, 'truncated'),
    engine: oneOf(o, 'engine', ['ripgrep', 'builtin']) ?? notSure(),
  }),
  code: (o) => {
    const out: Json = {
      language: oneOf(o, 'language', CODE_LANGUAGES) ?? notSure(),
      context: str(o, 'context'),
      results: array(o.results, (r) => codeResult(r) as unknown as Json),
      error: o.error === null ? null : codeError(defined(o.error)),
      stateLost: bool(o, 'stateLost'),
    };
    put(out, 'kernelStarted', optBool(o, 'kernelStarted'));
    put(out, 'droppedResults', optNum(o, 'droppedResults', count));
    return out;
  },
};

/** `.nullable()` number: null or the number (required). */
function nullable(o: Json, key: string, rule: Parameters<typeof num>[2]): number | null {
  if (!Object.hasOwn(o, key)) notSure();
  return nullishNum(o, key, rule) as number | null;
}

function output(value: Json): Json {
  const kind = value.kind;
  if (typeof kind !== 'string' || !Object.hasOwn(OUTPUTS, kind)) return notSure();
  return { kind, ...(OUTPUTS[kind] as (o: Json) => Json)(value) };
}

function check(value: unknown): StepResult {
  const o = defined(value);
  const version = num(o, 'schemaVersion', int);
  if (!SUPPORTED_SCHEMA_MAJORS.includes(version)) notSure();
  const out: Json = {
    schemaVersion: version,
    stepId: nullableString(o, 'stepId'),
    exitCode: nullable(o, 'exitCode', int),
    timedOut: bool(o, 'timedOut'),
    durationSeconds: num(o, 'durationSeconds', { min: 0 }),
    errorMessage: nullableString(o, 'errorMessage'),
  };
  put(out, 'errorCode', oneOf(o, 'errorCode', STEP_ERROR_CODES));
  put(out, 'cancelled', optBool(o, 'cancelled'));
  put(out, 'droppedLines', optNum(o, 'droppedLines', count));
  put(out, 'outputLines', optNum(o, 'outputLines', count));
  if (o.output !== undefined) out.output = output(defined(o.output));
  return out as StepResult;
}

/** `value` as StepResultSchema gives it, or undefined where the schema refuses it. */
export function checkStepResult(value: unknown): StepResult | undefined {
  return attempt(() => check(value));
}
