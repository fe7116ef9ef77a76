import { CODE_LANGUAGES } from './code-languages.js';
import {
  attempt,
  checkStringRecord,
  checkStrings,
  isObject,
  type Json,
  notSure,
  nullishNum,
  nullishStr,
  num,
  oneOf,
  optBool,
  optNum,
  optObject,
  optStr,
  put,
  type StringRule,
  str,
} from './fast-read.js';
import { Limits } from './limits.js';
import { SUPPORTED_SCHEMA_MAJORS } from './schema-major.js';
import type { Step } from './step.js';
import { STEP_KINDS, type StepKind } from './step-kinds.js';

/**
 * StepSchema (step.ts) without zod, for the agent: every step it is sure of comes out exactly as
 * the schema gives it (defaults filled, unknown keys dropped); anything else is undefined and goes
 * to decodeStep, which loads the schemas and words the refusal. The agent's single executable so
 * keeps no zod object in its start-up heap (docs/benchmarks.md, "Idle agent memory, part 3").
 * The rules below mirror step.ts field by field; fast-step.test.ts feeds both the same steps.
 */

const path: StringRule = { min: 1, max: 4096, noNul: true };
const workdir: StringRule = { max: 4096, noNul: true };
const anyNoNul: StringRule = { noNul: true };
const id64 = /^[A-Za-z0-9_-]{1,64}$/;

function common(o: Json, out: Json): void {
  const version = num(o, 'schemaVersion', { int: true });
  if (!SUPPORTED_SCHEMA_MAJORS.includes(version)) notSure();
  out.schemaVersion = version;
  out.stepId = str(o, 'stepId', { min: 1, max: 256 });
  const trace = optObject(o, 'traceContext');
  if (trace) {
    const traceContext: Json = { traceparent: str(trace, 'traceparent', { max: 512 }) };
    put(traceContext, 'tracestate', optStr(trace, 'tracestate', { max: 1024 }));
    out.traceContext = traceContext;
  }
}

function timeout(o: Json, fallback: number): number {
  const t = nullishNum(o, 'timeoutSeconds', { positive: true, max: Limits.runMaxTimeoutSeconds });
  return t ?? fallback;
}

function env(o: Json, out: Json): void {
  const value = o.env;
  if (value === undefined) return;
  out.env = value === null ? null : checkStringRecord(value, anyNoNul, anyNoNul);
}

function run(o: Json, out: Json): void {
  out.command = str(o, 'command', { min: 1, max: 64 * 1024, noNul: true });
  const args = o.args;
  out.args = args === undefined || args === null ? [] : checkStrings(args, anyNoNul, 0, Limits.runMaxArgs);
  out.shell = optBool(o, 'shell', false);
  env(o, out);
  out.timeoutSeconds = timeout(o, Limits.runDefaultTimeoutSeconds);
  put(out, 'stdin', optStr(o, 'stdin'));
  put(out, 'stdinEncoding', oneOf(o, 'stdinEncoding', ['utf8', 'base64']));
  put(out, 'stdinStream', optBool(o, 'stdinStream'));
  put(out, 'background', optBool(o, 'background'));
}

const transfer = (o: Json, out: Json): void => {
  out.path = str(o, 'path', path);
  out.transfer = str(o, 'transfer', { pattern: id64 });
  out.maxBytes = optNum(
    o,
    'maxBytes',
    { int: true, positive: true, max: Limits.transferMaxBytes },
    Limits.transferDefaultMaxBytes,
  );
};

/** The fields of each kind besides the common ones, `parallel` and `workingDirectory`. */
const KIND_FIELDS: Record<Exclude<StepKind, 'shutdown'>, (o: Json, out: Json) => void> = {
  run,
  readFile: (o, out) => {
    out.path = str(o, 'path', path);
  },
  writeFile: (o, out) => {
    out.path = str(o, 'path', path);
    out.content = str(o, 'content');
    out.encoding = oneOf(o, 'encoding', ['utf8', 'base64'], 'utf8');
    put(out, 'mode', optNum(o, 'mode', { int: true, min: 0, max: 0o7777 }));
  },
  listFiles: (o, out) => {
    out.path = optStr(o, 'path', path) ?? '.';
    out.maxDepth = optNum(o, 'maxDepth', { int: true, min: 1, max: Limits.listFilesMaxDepth }, 1);
    out.maxEntries = optNum(
      o,
      'maxEntries',
      { int: true, min: 1, max: Limits.listFilesMaxEntries },
      Limits.listFilesMaxEntries,
    );
  },
  grep: (o, out) => {
    out.pattern = str(o, 'pattern', { min: 1, max: 4096, noNul: true });
    out.path = optStr(o, 'path', path) ?? '.';
    put(out, 'glob', optStr(o, 'glob', { max: 1024, noNul: true }));
    out.ignoreCase = optBool(o, 'ignoreCase', false);
    out.fixedStrings = optBool(o, 'fixedStrings', false);
    out.maxMatches = optNum(
      o,
      'maxMatches',
      { int: true, min: 1, max: Limits.grepMaxMatches },
      Limits.grepDefaultMaxMatches,
    );
  },
  stats: () => {},
  shell: (o, out) => {
    out.session = optStr(o, 'session', { pattern: /^[A-Za-z0-9._-]{1,64}$/ }) ?? 'default';
    out.command = str(o, 'command', { min: 1, max: 64 * 1024, noNul: true });
    out.timeoutSeconds = timeout(o, Limits.runDefaultTimeoutSeconds);
  },
  upload: transfer,
  download: transfer,
  terminal: (o, out) => {
    out.terminal = str(o, 'terminal', { pattern: id64 });
    const command = o.command;
    if (command !== undefined)
      out.command = checkStrings(command, { max: 64 * 1024, noNul: true }, 1, Limits.runMaxArgs);
    out.cols = optNum(o, 'cols', { int: true, min: 1, max: Limits.terminalMaxCols }, 80);
    out.rows = optNum(o, 'rows', { int: true, min: 1, max: Limits.terminalMaxRows }, 24);
    env(o, out);
    out.timeoutSeconds = timeout(o, Limits.runMaxTimeoutSeconds);
  },
  code: (o, out) => {
    out.language = oneOf(o, 'language', CODE_LANGUAGES, 'python');
    put(out, 'context', optStr(o, 'context', { pattern: /^[A-Za-z0-9._-]{1,64}$/ }));
    const code = str(o, 'code');
    if (code.length * 3 > Limits.codeMaxBytes && Buffer.byteLength(code, 'utf8') > Limits.codeMaxBytes)
      notSure();
    out.code = code;
    out.timeoutSeconds = timeout(o, Limits.runDefaultTimeoutSeconds);
  },
  watch: (o, out) => {
    out.path = str(o, 'path', path);
    out.recursive = optBool(o, 'recursive', false);
    out.timeoutSeconds = timeout(o, Limits.runMaxTimeoutSeconds);
  },
};

function decode(json: unknown): Step {
  if (!isObject(json)) return notSure();
  const kind = json.kind === undefined && !('kind' in json) ? 'run' : json.kind;
  if (!STEP_KINDS.includes(kind as StepKind)) notSure();
  const out: Json = { kind };
  common(json, out);
  if (kind !== 'shutdown') {
    out.parallel = optBool(json, 'parallel', false);
    KIND_FIELDS[kind as Exclude<StepKind, 'shutdown'>](json, out);
    put(out, 'workingDirectory', nullishStr(json, 'workingDirectory', workdir));
  }
  // `out` holds exactly the fields StepSchema's member for `kind` gives (fast-step.test.ts).
  return out as unknown as Step;
}

/** StepSchema's output for `json` when sure of it; undefined: ask StepSchema. */
export function fastStep(json: unknown): Step | undefined {
  return attempt(() => decode(json));
}

/** A raw step as decodeStep would decode it, when sure it is valid; undefined: ask decodeStep. */
export function fastDecodeStep(raw: string): Step | undefined {
  // Three bytes per UTF-16 unit at most: only a long message needs counting.
  if (raw.length * 3 > Limits.messageMaxBytes && Buffer.byteLength(raw, 'utf8') > Limits.messageMaxBytes)
    return undefined;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return undefined;
  }
  return fastStep(json);
}
