/**
 * CLI start-up (issue 33, goal: `sandstream exec <id> -- true` ≤ 1.5× a bare `node -e 0`), all in
 * one run, interleaved round by round so the machine's load hits every measure alike; medians of
 * wall time per process:
 *
 *   node -e 0                      the floor: a node process that does nothing
 *   empty start-up snapshot        node from a snapshot of nothing: what any snapshot costs
 *   node --snapshot-blob … exec    the CLI's snapshot without the sh launcher (bin/sandstream): the
 *                                  full CLI's exec, what the launcher ran for exec before the lean one
 *   sandstream --help              the `sandstream` command (bin/sandstream: the start-up snapshot)
 *   sandstream exec <id> -- true   the same, running `true` in a live sandbox (in-process backend):
 *                                  since issue 33 part 5 the launcher runs the lean exec for it
 *   lean exec bundle (node)        that lean exec (dist/bundle/sandstream-exec.cjs) without the launcher
 *   modules: --help / exec         the CLI loaded as modules (bin/sandstream.mjs), as before
 *   SDK exec, no process start     sandbox.exec('true') from this process: the round trip alone
 *   baseline blob: exec            with CLI_STARTUP_BASELINE_BLOB=<libs/client/dist/bundle/…blob of
 *                                  another build> (its package's dist/.tsbuildinfo files beside it,
 *                                  as the build left them), that build's exec side by side
 *
 * The four services run as processes on the shared Redis under a fresh namespace.
 *
 *   npm run build && npx vite-node test/bench/cli-startup.bench.ts [rounds]
 *   CLI_STARTUP_CPU=1 …   the same with CPU time (perf stat's task-clock) instead of wall time
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, testRedisUrl } from '@sandstream/test-support';
import { startStack } from '../helpers/services-stack.js';

const ROUNDS = Number(process.argv[2] ?? 15);
/** CLI_STARTUP_CPU=1: CPU time (perf stat's task-clock) instead of wall time; steadier on a loaded machine. */
const CPU_TIME = process.env.CLI_STARTUP_CPU === '1';
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

const bin = join(repoRoot, 'libs/client/bin/sandstream');
const modules = join(repoRoot, 'libs/client/bin/sandstream.mjs');
const blob = join(repoRoot, 'libs/client/dist/bundle/sandstream-cli.blob');
const leanExec = join(repoRoot, 'libs/client/dist/bundle/sandstream-exec.cjs');

// A start-up snapshot of nothing: the part of the CLI's start that any snapshot costs.
const emptyDir = mkdtempSync(join(tmpdir(), 'empty-snapshot-'));
const emptyBlob = join(emptyDir, 'empty.blob');
writeFileSync(
  join(emptyDir, 'empty.js'),
  'require("node:v8").startupSnapshot.setDeserializeMainFunction(() => {});\n',
);
execFileSync(
  process.execPath,
  ['--snapshot-blob', emptyBlob, '--build-snapshot', join(emptyDir, 'empty.js')],
  {
    cwd: emptyDir,
  },
);

const stack = await startStack({ label: 'clistart' });
try {
  const env = { ...process.env, REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: stack.namespace };
  const sandbox = await stack.client.sandboxes.create({ image: 'sandstream/busybox:static' });
  const timed = (file: string, args: string[]) => {
    if (CPU_TIME) {
      // perf stat's task-clock: CPU time of the process, its threads and children (the launcher's sh too).
      const { stderr: report, status } = spawnSync(
        'perf',
        ['stat', '-x,', '-e', 'task-clock', '--', file, ...args],
        { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' },
      );
      if (status !== 0) throw new Error(`${file} ${args.join(' ')} exited ${status}: ${report}`);
      return Number(/^([\d.]+),msec,task-clock/m.exec(report)?.[1] ?? Number.NaN);
    }
    const started = process.hrtime.bigint();
    execFileSync(file, args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  const measures: Record<string, [string, string[]]> = {
    'node -e 0': [process.execPath, ['-e', '0']],
    'empty start-up snapshot': [process.execPath, ['--snapshot-blob', emptyBlob]],
    'sandstream --help': [bin, ['--help']],
    'sandstream exec <id> -- true': [bin, ['exec', sandbox.id, '--', 'true']],
    'lean exec bundle (node)': [process.execPath, [leanExec, 'exec', sandbox.id, '--', 'true']],
    'node --snapshot-blob … exec': [
      process.execPath,
      ['--snapshot-blob', blob, '--', 'exec', sandbox.id, '--', 'true'],
    ],
    ...(process.env.CLI_STARTUP_BASELINE_BLOB
      ? {
          'baseline blob: exec': [
            process.execPath,
            [
              '--snapshot-blob',
              process.env.CLI_STARTUP_BASELINE_BLOB,
              '--',
              'exec',
              sandbox.id,
              '--',
              'true',
            ],
          ] as [string, string[]],
        }
      : {}),
    'modules: --help': [process.execPath, [modules, '--help']],
    'modules: exec <id> -- true': [process.execPath, [modules, 'exec', sandbox.id, '--', 'true']],
  };
  const times: Record<string, number[]> = Object.fromEntries(
    [...Object.keys(measures), 'SDK exec, no process start'].map((k) => [k, []]),
  );
  // The exec round trip alone (Redis, the agent, `true`), from this already-running process: what
  // `sandstream exec` costs beyond it is the CLI's start-up and connection.
  const sdkExec = async () => {
    const started = process.hrtime.bigint();
    await sandbox.exec('true');
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  await sdkExec();
  // One warm-up round (page cache, the sandbox's first command) not counted.
  for (const [file, args] of Object.values(measures)) timed(file, args);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, [file, args]] of Object.entries(measures)) times[name]?.push(timed(file, args));
    times['SDK exec, no process start']?.push(await sdkExec());
  }
  const floor = median(times['node -e 0'] ?? []);
  console.log(
    `CLI start-up, ${ROUNDS} rounds, medians of ${CPU_TIME ? 'CPU time (the SDK row: wall)' : 'wall time'} (node ${process.version}):`,
  );
  for (const [name, values] of Object.entries(times))
    console.log(
      `  ${name.padEnd(32)} ${median(values).toFixed(0).padStart(5)} ms  ${(median(values) / floor).toFixed(2)}x node -e 0`,
    );
  await sandbox.close();
} finally {
  await stack.stop();
  rmSync(emptyDir, { recursive: true, force: true });
}
