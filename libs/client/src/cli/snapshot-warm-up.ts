import { decodeEventEntry, SCHEMA_VERSION, StepResultSchema, StepSchema } from '@sandstream/wire';
import { SandstreamClientOptionsSchema } from '../client-options.js';
import { ExecOptionsSchema } from '../sandbox-options.js';

/**
 * Run once while the start-up snapshot is built (snapshot-main.ts): parses what `exec` parses
 * (its options, the step it pushes, the events and result it reads), so the bytecode of zod's
 * parsers and of ours is in the snapshot instead of compiled on every start (V8 compiles a
 * function on its first call; `exec` compiled ~290 of them, docs/benchmarks.md "CLI start-up,
 * part 2"). Pure: no I/O, nothing kept but what zod caches on its schemas anyway.
 */
export function warmUpExecPath(): void {
  // safeParse throughout: a sample that no longer fits a schema costs a warm-up, not the build.
  // Every command makes a client (main.ts): over Redis, or over the API.
  SandstreamClientOptionsSchema.safeParse({
    redis: { duplicate: () => {} },
    namespace: 'sandstream',
    onWarning: () => {},
  });
  SandstreamClientOptionsSchema.safeParse({ url: 'http://127.0.0.1:8080', apiKey: 'k', onWarning: () => {} });
  ExecOptionsSchema.safeParse({
    shell: false,
    env: { A: '1' },
    timeoutSeconds: 60,
    onStdout: () => {},
    onStderr: () => {},
    onGap: () => {},
  });
  StepSchema.safeParse({
    kind: 'run',
    command: 'true',
    args: ['a'],
    shell: false,
    workingDirectory: null,
    env: { A: '1' },
    timeoutSeconds: 60,
    schemaVersion: SCHEMA_VERSION,
    stepId: 'cmd-0',
    parallel: true,
  });
  const at = '2026-01-01T00:00:00.000Z';
  const result = {
    schemaVersion: SCHEMA_VERSION,
    stepId: 'cmd-1',
    exitCode: 0,
    timedOut: false,
    durationSeconds: 0.001,
    errorMessage: null,
    droppedLines: 0,
    outputLines: 1,
  };
  decodeEventEntry([
    'event',
    JSON.stringify({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'cmd-1',
      kind: 'started',
      seq: 0,
      timestamp: at,
    }),
    'event',
    JSON.stringify({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'cmd-1',
      kind: 'stdout',
      seq: 1,
      line: 'a',
      timestamp: at,
    }),
    'event',
    JSON.stringify({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'cmd-1',
      kind: 'completed',
      seq: 2,
      exitCode: 0,
      droppedLines: 0,
      timestamp: at,
      result,
    }),
  ]);
  StepResultSchema.safeParse(result);
}
