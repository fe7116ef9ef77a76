import { describe, expect, it } from 'vitest';
import { ControlMessageSchema } from './control.js';
import { fastDecodeControlMessage, fastPoolClaim } from './fast-messages.js';
import { checkStepResult } from './fast-result.js';
import { fastDecodeStep, fastStep } from './fast-step.js';
import { Limits } from './limits.js';
import { PoolClaimSchema } from './pool-claim.js';
import {
  CodeStepSchema,
  DownloadStepSchema,
  GrepStepSchema,
  ListFilesStepSchema,
  ReadFileStepSchema,
  RunStepSchema,
  ShellStepSchema,
  ShutdownStepSchema,
  StatsStepSchema,
  StepSchema,
  TerminalStepSchema,
  UploadStepSchema,
  WatchStepSchema,
  WriteFileStepSchema,
} from './step.js';
import { StepOutputSchema, StepResultSchema } from './step-result.js';

type Json = Record<string, unknown>;
const common = { schemaVersion: 1, stepId: 's-1' };

/** The fields every kind has (shutdown drops all but the first three). */
const everyKind = { traceContext: { traceparent: '00-x' }, parallel: false, workingDirectory: '/w' };

/** One valid step of each kind, with every optional field set, and the same with none. */
const FULL_STEPS: Json[] = [
  {
    ...common,
    kind: 'run',
    parallel: true,
    command: 'echo',
    args: ['a', 'b'],
    shell: true,
    workingDirectory: '/w',
    env: { A: '1', B: '' },
    timeoutSeconds: 2.5,
    stdin: 'aGk=',
    stdinEncoding: 'base64',
    stdinStream: false,
    background: true,
    traceContext: { traceparent: '00-abc', tracestate: 'x=1', extra: 1 },
  },
  { ...common, kind: 'readFile', path: 'a.txt', workingDirectory: null },
  { ...common, kind: 'writeFile', path: 'a', content: 'hi', encoding: 'base64', mode: 420 },
  { ...common, kind: 'listFiles', path: 'd', maxDepth: 3, maxEntries: 10 },
  {
    ...common,
    kind: 'grep',
    pattern: 'x+',
    path: 'src',
    glob: '*.ts',
    ignoreCase: true,
    fixedStrings: true,
    maxMatches: 5,
  },
  { ...common, kind: 'stats', parallel: true },
  { ...common, kind: 'shell', session: 'main', command: 'cd /', timeoutSeconds: null },
  { ...common, kind: 'upload', path: 'd', transfer: 't-1', maxBytes: 1024 },
  { ...common, kind: 'download', path: 'd', transfer: 't-1', maxBytes: 2048 },
  {
    ...common,
    kind: 'terminal',
    terminal: 'tty1',
    command: ['bash', '-l'],
    cols: 120,
    rows: 40,
    env: null,
    timeoutSeconds: 60,
  },
  { ...common, kind: 'code', language: 'bash', context: 'c.1', code: 'echo 1', timeoutSeconds: 3 },
  { ...common, kind: 'watch', path: '.', recursive: true, timeoutSeconds: 10 },
  { ...common, kind: 'shutdown', parallel: true },
].map((step) => ({ ...everyKind, ...step }));
const MINIMAL_STEPS: Json[] = [
  { ...common, command: 'true' },
  { ...common, kind: 'run', command: 'true' },
  { ...common, kind: 'readFile', path: 'a' },
  { ...common, kind: 'writeFile', path: 'a', content: '' },
  { ...common, kind: 'listFiles' },
  { ...common, kind: 'grep', pattern: 'x' },
  { ...common, kind: 'stats' },
  { ...common, kind: 'shell', command: 'ls' },
  { ...common, kind: 'upload', path: 'd', transfer: 't' },
  { ...common, kind: 'terminal', terminal: 't' },
  { ...common, kind: 'code', code: '' },
  { ...common, kind: 'watch', path: '.' },
  { ...common, kind: 'shutdown' },
];

const ODD_VALUES: unknown[] = [
  null,
  '',
  'x',
  'a\0b',
  'x'.repeat(65),
  'x'.repeat(257),
  'x'.repeat(4097),
  'x'.repeat(64 * 1024 + 1),
  0,
  -1,
  1,
  1.5,
  2,
  24,
  1e20,
  Limits.runMaxTimeoutSeconds + 1,
  true,
  false,
  [],
  ['a'],
  ['a\0'],
  {},
  { a: 'b' },
  { 'a\0': 'b' },
  { a: 1 },
  { traceparent: 'x' },
  'utf8',
  'base64',
  'python',
  'cancel',
  'SIGKILL',
  'SIGFOO',
];

/** Every field of `base` (and a few it lacks) set to each odd value, and deleted. */
function variants(base: Json, extraKeys: readonly string[]): Json[] {
  const keys = [...new Set([...Object.keys(base), ...extraKeys])];
  const out: Json[] = [base, { ...base, unknownKey: 1 }];
  for (const key of keys) {
    const { [key]: _, ...without } = base;
    out.push(without);
    for (const value of ODD_VALUES) out.push({ ...base, [key]: value });
  }
  return out;
}

const STEP_KEYS = [
  'kind',
  'schemaVersion',
  'stepId',
  'traceContext',
  'parallel',
  'workingDirectory',
  'env',
  'timeoutSeconds',
  'path',
  'command',
  'args',
  'maxBytes',
  'cols',
  'context',
  'language',
  'code',
];

/** The fast decoder's answer, held to the schema's: sure means the schema's own value. */
function expectAgrees(
  fast: unknown,
  schema: { safeParse(v: unknown): { success: boolean; data?: unknown } },
  input: unknown,
) {
  const full = schema.safeParse(input);
  if (fast === undefined) return full.success;
  expect({ input, success: full.success }).toEqual({ input, success: true });
  expect(fast).toStrictEqual(full.data);
  return true;
}

/** Each kind's schema: a field it gains must be in FULL_STEPS (and so in fast-step.ts) too. */
const MEMBERS: Record<string, { shape: Record<string, unknown> }> = {
  run: RunStepSchema,
  readFile: ReadFileStepSchema,
  writeFile: WriteFileStepSchema,
  listFiles: ListFilesStepSchema,
  grep: GrepStepSchema,
  stats: StatsStepSchema,
  shell: ShellStepSchema,
  upload: UploadStepSchema,
  download: DownloadStepSchema,
  terminal: TerminalStepSchema,
  code: CodeStepSchema,
  watch: WatchStepSchema,
  shutdown: ShutdownStepSchema,
};

/** The keys of `shape` missing from `sample`. */
const missing = (shape: Record<string, unknown>, sample: Json) =>
  Object.keys(shape).filter((key) => !Object.hasOwn(sample, key));

describe('fastStep', () => {
  it('is tried on every field of every kind: a field the schema gains fails here until both know it', () => {
    for (const [kind, schema] of Object.entries(MEMBERS)) {
      const sample = FULL_STEPS.find((step) => step.kind === kind) as Json;
      expect({ kind, missing: missing(schema.shape, sample) }).toEqual({ kind, missing: [] });
    }
  });

  it('gives the schema’s own output for every valid step of each kind, defaults filled', () => {
    for (const step of [...FULL_STEPS, ...MINIMAL_STEPS]) {
      const fast = fastStep(step);
      expect(fast, JSON.stringify(step)).toBeDefined();
      expectAgrees(fast, StepSchema, step);
    }
  });

  it('is never sure of a step the schema refuses, and agrees with it on every variant', () => {
    let sure = 0;
    let leftToSchema = 0;
    for (const base of [...FULL_STEPS, ...MINIMAL_STEPS]) {
      for (const step of variants(base, STEP_KEYS)) {
        const fast = fastStep(step);
        const valid = expectAgrees(fast, StepSchema, step);
        if (fast !== undefined) sure++;
        else if (valid) leftToSchema++;
      }
    }
    // Nearly every valid variant is decoded without zod.
    expect(sure).toBeGreaterThan(1000);
    expect(leftToSchema).toBeLessThan(sure / 20);
  });

  it('leaves what is not a JSON object, or too large, to decodeStep', () => {
    expect(fastDecodeStep('not json')).toBeUndefined();
    expect(fastDecodeStep('[1]')).toBeUndefined();
    expect(fastDecodeStep('null')).toBeUndefined();
    expect(fastDecodeStep(JSON.stringify({ ...common, command: 'x'.repeat(Limits.messageMaxBytes) }))).toBe(
      undefined,
    );
    expect(fastDecodeStep(JSON.stringify(MINIMAL_STEPS[0]))).toEqual(StepSchema.parse(MINIMAL_STEPS[0]));
  });
});

describe('fastDecodeControlMessage', () => {
  it('agrees with ControlMessageSchema', () => {
    const base = { schemaVersion: 1, kind: 'cancel', stepId: 's', reason: 'r', signal: 'SIGINT' };
    expect(fastDecodeControlMessage(JSON.stringify(base))).toBeDefined();
    for (const message of variants(base, ['kind'])) {
      expectAgrees(fastDecodeControlMessage(JSON.stringify(message)), ControlMessageSchema, message);
    }
  });
});

describe('fastPoolClaim', () => {
  it('agrees with PoolClaimSchema, a strict object', () => {
    const base = {
      jobId: 'job-1',
      username: 'u',
      notifyStream: 'n',
      live: true,
      env: { A: 'b' },
      unsetEnv: ['B'],
      traceContext: { traceparent: 'p' },
      claimedAt: 1,
    };
    expect(fastPoolClaim(base)).toBeDefined();
    expect(fastPoolClaim({ jobId: 'j' })).toEqual(PoolClaimSchema.parse({ jobId: 'j' }));
    for (const claim of variants(base, [])) expectAgrees(fastPoolClaim(claim), PoolClaimSchema, claim);
  });
});

describe('checkStepResult', () => {
  const result = {
    schemaVersion: 1,
    stepId: 's',
    exitCode: 0,
    timedOut: false,
    durationSeconds: 0.5,
    errorMessage: null,
  };
  const outputs: Json[] = [
    { kind: 'readFile', path: 'a', content: 'x', sizeBytes: 1 },
    { kind: 'writeFile', path: 'a', bytesWritten: 1 },
    {
      kind: 'listFiles',
      path: '.',
      entries: [{ path: 'a', type: 'file', sizeBytes: 1, extra: 1 }],
      truncated: false,
    },
    { kind: 'upload', path: 'a', bytes: 1, files: 1 },
    { kind: 'download', path: 'a', bytes: 1, files: 1 },
    {
      kind: 'stats',
      cpuSeconds: 0.25,
      memoryBytes: null,
      memoryLimitBytes: 10,
      workspaceBytes: 0,
      workspaceFiles: 0,
      workspaceTruncated: false,
    },
    {
      kind: 'grep',
      matches: [{ path: 'a', line: 1, column: 2, text: 't' }],
      truncated: true,
      engine: 'builtin',
    },
    {
      kind: 'code',
      language: 'python',
      context: 'c',
      results: [{ text: 't', json: { a: [1] }, isMainResult: true }],
      error: { name: 'E', value: 'v', traceback: 't' },
      stateLost: false,
      kernelStarted: true,
      droppedResults: 0,
    },
  ];

  it('is tried on every field of a result and of each output', () => {
    const full = {
      ...result,
      errorCode: 'internal',
      cancelled: true,
      droppedLines: 2,
      outputLines: 3,
      output: {},
    };
    expect(missing(StepResultSchema.shape, full)).toEqual([]);
    for (const member of StepOutputSchema.options) {
      const sample = outputs.find((output) => output.kind === member.shape.kind.value) as Json;
      expect({ sample: sample.kind, missing: missing(member.shape, sample) }).toEqual({
        sample: sample.kind,
        missing: [],
      });
    }
  });

  it('gives the schema’s value for what the agent writes, and refuses what the schema refuses', () => {
    const bases: Json[] = [
      result,
      { ...result, errorCode: 'internal', cancelled: true, droppedLines: 2, outputLines: 3, stepId: null },
      ...outputs.map((output) => ({ ...result, output })),
    ];
    for (const base of bases) {
      expect(checkStepResult(base), JSON.stringify(base)).toBeDefined();
      for (const candidate of variants(base, ['output', 'errorCode'])) {
        const checked = checkStepResult(candidate);
        const full = StepResultSchema.safeParse(candidate);
        expect({ candidate, valid: checked !== undefined }).toEqual({ candidate, valid: full.success });
        if (checked) expect(checked).toStrictEqual(full.data);
      }
    }
    // The items of an output's list, each field varied as above.
    const nested = outputs.flatMap((output) =>
      (['entries', 'matches', 'results'] as const)
        .filter((key) => Array.isArray(output[key]))
        .flatMap((key) =>
          variants((output[key] as Json[])[0] as Json, []).map((item) => ({ ...output, [key]: [item] })),
        ),
    );
    const codeErrors = variants((outputs[7] as { error: Json }).error, []).map((error) => ({
      ...outputs[7],
      error,
    }));
    for (const broken of [...outputs.flatMap((output) => variants(output, [])), ...nested, ...codeErrors]) {
      const candidate = { ...result, output: broken };
      const full = StepResultSchema.safeParse(candidate);
      const checked = checkStepResult(candidate);
      expect({ broken, valid: checked !== undefined }).toEqual({ broken, valid: full.success });
      if (checked) expect(checked).toStrictEqual(full.data);
    }
  });

  it('takes a key set to undefined as absent, as the schema does', () => {
    expect(checkStepResult({ ...result, cancelled: undefined, errorCode: undefined })).toEqual(result);
  });
});
