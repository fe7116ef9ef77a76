import {
  decodeJobEventFields,
  SANDBOX_HISTORY_LIMIT,
  SANDBOX_MAX_RUNNING_COMMANDS,
  TERMINAL_STATES,
} from '@sandstream/bus';
import {
  decodeEventEntry,
  encodeCancel,
  Limits,
  SCHEMA_VERSION,
  StepEventSchema,
  StepResultSchema,
  StepSchema,
} from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { runStepOf } from '../../command-runner.js';
import { LocalConnectionFileSchema } from '../connection-config.js';
import { fullDecoders } from './full-decoders.js';
import { leanCancelOf, leanPushOf, parseLeanExecLine } from './lean-command-line.js';
import {
  fastLocalFile,
  fastStepEvent,
  fastStepResult,
  LEAN_LIMITS,
  LeanDecoders,
  TERMINAL_JOB_STATES,
} from './lean-decode.js';

// The lean exec's decoders and encoders against the schemas the full CLI uses: the same records,
// valid and invalid, must give the same answer (a fast path that is not sure defers to the schema).

const at = '2026-01-01T00:00:00.000Z';
const result = {
  schemaVersion: 1,
  stepId: 'cmd-3',
  exitCode: 0,
  timedOut: false,
  durationSeconds: 0.25,
  errorMessage: null,
};
const results: unknown[] = [
  result,
  { ...result, exitCode: null, errorMessage: 'spawn failed', errorCode: 'spawn_failed' },
  { ...result, cancelled: true, droppedLines: 3, outputLines: 10, extra: 'ignored' },
  { ...result, stepId: null },
  { errorMessage: null, durationSeconds: 1, timedOut: true, exitCode: 137, stepId: 'x', schemaVersion: 1 },
  { ...result, output: { kind: 'writeFile', path: 'a', bytesWritten: 1 } },
  { ...result, output: { kind: 'writeFile', path: 'a' } },
  { ...result, schemaVersion: 2 },
  { ...result, schemaVersion: '1' },
  { ...result, exitCode: 1.5 },
  { ...result, exitCode: 2 ** 60 },
  { ...result, durationSeconds: -1 },
  { ...result, timedOut: 'no' },
  { ...result, errorCode: 'nope' },
  { ...result, cancelled: 1 },
  { ...result, droppedLines: -1 },
  { ...result, outputLines: 0.5 },
  { ...result, errorMessage: undefined },
  { ...result, stepId: 7 },
  (({ timedOut: _, ...rest }) => rest)(result),
  null,
  [],
  'result',
  42,
];
const event = { schemaVersion: 1, stepId: 'cmd-3', kind: 'stdout', seq: 1, line: 'hello', timestamp: at };
const events: unknown[] = [
  event,
  { ...event, kind: 'stderr', line: '' },
  { ...event, kind: 'started', seq: 0, line: undefined },
  { schemaVersion: 1, stepId: 'cmd-3', kind: 'started', seq: 0, timestamp: at },
  { ...event, kind: 'completed', seq: 2, exitCode: 0, droppedLines: 0, result },
  { ...event, kind: 'completed', seq: 2, exitCode: null },
  { ...event, extra: { deep: true } },
  ...results.map((r) => ({ ...event, kind: 'completed', seq: 2, result: r })),
  { ...event, seq: -1 },
  { ...event, seq: 1.5 },
  { ...event, seq: '1' },
  { ...event, kind: 'other' },
  { ...event, line: 5 },
  { ...event, timestamp: undefined },
  { ...event, stepId: undefined },
  { ...event, exitCode: 'a' },
  { ...event, droppedLines: -2 },
  { ...event, schemaVersion: 3 },
  null,
  [event],
];

/** JSON text keeps key order: the fast paths must give the schema's output exactly. */
const same = (a: unknown, b: unknown) => expect(JSON.stringify(a)).toBe(JSON.stringify(b));

describe('lean exec decoders', () => {
  it('a StepResult: accepted by the fast path only as the schema accepts it, with its output', () => {
    for (const record of results) {
      const schema = StepResultSchema.safeParse(record);
      const fast = fastStepResult(record);
      if (fast !== undefined) {
        expect(schema.success, JSON.stringify(record)).toBe(true);
        same(fast, schema.data);
      }
      same(new LeanDecoders(() => fullDecoders).stepResult(record), schema.success ? schema.data : undefined);
    }
    // The ones exec sees take the fast path (no zod loaded for them).
    expect(results.slice(0, 5).every((r) => fastStepResult(r) !== undefined)).toBe(true);
  });

  it('an events stream entry: decodeEventEntry, event by event, packed or not', () => {
    for (const record of events) {
      const schema = StepEventSchema.safeParse(record);
      const fast = fastStepEvent(record);
      if (fast !== undefined) {
        expect(schema.success, JSON.stringify(record)).toBe(true);
        same(fast, schema.data);
      }
    }
    const entry = events.flatMap((e) => ['event', JSON.stringify(e)]);
    const withOthers = ['job', '{}', ...entry, 'event', 'not json', 'ready', '1'];
    let loaded = 0;
    const decoders = new LeanDecoders(() => {
      loaded += 1;
      return fullDecoders;
    });
    same(decoders.eventEntry(withOthers), decodeEventEntry(withOthers));
    // Only the records the fast path is not sure of went to the schemas, loaded once.
    expect(loaded).toBe(1);
    let unused = 0;
    const plain = events.slice(0, 7).flatMap((e) => ['event', JSON.stringify(e)]);
    new LeanDecoders(() => {
      unused += 1;
      return fullDecoders;
    }).eventEntry(plain);
    expect(unused).toBe(0);
  });

  it('a job entry ends the follow exactly when decodeJobEventFields says it is a terminal transition', () => {
    const job = { type: 'transition', jobId: 'sb-1', tenant: 't', from: 'running', to: 'succeeded', at: 1 };
    const entries: string[][] = [
      ['job', JSON.stringify(job)],
      ['job', JSON.stringify({ ...job, to: 'failed', reason: 'closed' })],
      ['job', JSON.stringify({ ...job, to: 'running', from: 'starting' })],
      ['job', JSON.stringify({ ...job, type: 'progress' })],
      ['job', JSON.stringify({ ...job, jobId: '{bad}' })],
      ['job', JSON.stringify({ ...job, at: 'now' })],
      ['job', 'not json'],
      ['event', '{}', 'job', JSON.stringify(job)],
      ['ready', '1'],
    ];
    const decoders = new LeanDecoders(() => fullDecoders);
    for (const fields of entries) {
      const job = decodeJobEventFields(fields);
      expect(decoders.endsJob(fields), JSON.stringify(fields)).toBe(
        job?.type === 'transition' && TERMINAL_STATES.includes(job.to),
      );
    }
    expect([...TERMINAL_JOB_STATES]).toEqual([...TERMINAL_STATES]);
  });

  it("npm start's local.json: taken only as LocalConnectionFileSchema takes it", () => {
    const file = { redisUrl: 'redis://:pw@127.0.0.1:6390', namespace: 'ns', pid: 12 };
    const files: unknown[] = [
      file,
      { ...file, natsUrl: 'nats://127.0.0.1:4223', later: 'field' },
      { ...file, natsUrl: 'http://x' },
      { ...file, redisUrl: 'http://x' },
      { ...file, namespace: '' },
      { ...file, pid: 0 },
      { ...file, pid: 1.5 },
      { ...file, pid: undefined },
      null,
    ];
    for (const f of files) {
      const schema = LocalConnectionFileSchema.safeParse(f);
      const fast = fastLocalFile(f);
      if (fast !== undefined) same(fast, schema.data);
      else expect(schema.success && JSON.stringify(f) === JSON.stringify(schema.data)).toBe(false);
    }
  });

  it("the step it pushes is StepSchema's output for what the full CLI would push; the cancel is encodeCancel's", () => {
    const lines = [
      ['exec', 'sb-1', '--', 'true'],
      ['exec', '--shell', '--cwd', '/tmp', 'sb-1', '--', 'pwd && ls', '-la'],
      ['exec', 'sb-1', '--env', 'A=1', '--env=B=x=y', '--timeout', '2.5', '--', 'sh', '-c', 'echo "ü"'],
      ['exec', '--redis-url', 'redis://h:1', '--namespace', 'n', 'sb-1', '--', 'a', '', 'b'],
    ];
    for (const argv of lines) {
      const line = parseLeanExecLine(argv);
      if (!line) throw new Error(`not taken: ${argv.join(' ')}`);
      const push = leanPushOf(line, 1);
      const full = StepSchema.parse({
        ...runStepOf(line.shell ? line.commandLine.join(' ') : line.commandLine, line, 'exec'),
        shell: line.shell,
        env: line.env,
        ...(line.timeoutSeconds !== undefined ? { timeoutSeconds: line.timeoutSeconds } : {}),
        schemaVersion: SCHEMA_VERSION,
        stepId: 'cmd-0',
        parallel: true,
      });
      expect(`${push?.stepHead}cmd-0${push?.stepTail}`).toBe(JSON.stringify(full));
    }
    expect(leanCancelOf('cmd-9', 'cancelled by the client')).toBe(
      encodeCancel('cmd-9', 'cancelled by the client'),
    );
  });

  it('hands the forms it does not take to the full CLI', () => {
    const refused = [
      ['exec', '-i', 'sb-1', '--', 'sort'],
      ['exec', 'sb-1', '--', 'a\0b'],
      ['exec', '--env', 'A', 'sb-1', '--', 'true'],
      ['exec', '--timeout', '0', 'sb-1', '--', 'true'],
      ['exec', '--timeout', String(Limits.runMaxTimeoutSeconds + 1), 'sb-1', '--', 'true'],
      ['exec', '--url', 'http://x', 'sb-1', '--', 'true'],
      ['exec', '--cwd', '', 'sb-1', '--', 'true'],
      ['exec', 'sb-1', 'sb-2', '--', 'true'],
      ['exec', 'sb-1', '--'],
      ['exec', 'sb-1'],
      ['exec', '{sb}', '--', 'true'],
      ['exec', '--shell=yes', 'sb-1', '--', 'true'],
      ['exec', '--cwd', '--shell', 'sb-1', '--', 'true'],
      ['sandbox', 'ls'],
    ];
    for (const argv of refused) expect(parseLeanExecLine(argv), argv.join(' ')).toBeUndefined();
    const line = parseLeanExecLine(['exec', 'sb-1', '--', 'x']);
    expect(line && leanPushOf({ ...line, commandLine: ['x'.repeat(64 * 1024 + 1)] }, 1)).toBeUndefined();
    expect(
      line && leanPushOf({ ...line, commandLine: ['x', ...Array(10_001).fill('a')] }, 1),
    ).toBeUndefined();
  });

  it('its copies of the wire and bus constants are theirs', () => {
    expect(LEAN_LIMITS).toEqual({
      schemaVersion: SCHEMA_VERSION,
      messageMaxBytes: Limits.messageMaxBytes,
      runMaxArgs: Limits.runMaxArgs,
      runMaxTimeoutSeconds: Limits.runMaxTimeoutSeconds,
      runDefaultTimeoutSeconds: Limits.runDefaultTimeoutSeconds,
      historyLimit: SANDBOX_HISTORY_LIMIT,
      maxRunningCommands: SANDBOX_MAX_RUNNING_COMMANDS,
    });
  });
});
