/**
 * The reaper's CPU per job (issue 32 §3: "reaper ≤ 1 ms per job"). The four services as
 * processes on a private redis-server (in-process backend), the reaper with a pass every
 * REAPER_INTERVAL_SECONDS=5 and no retention, so each finished job is scanned, judged and deleted
 * within a pass or two of its end. Reaper CPU (every thread's schedstat) is read:
 *   1. idle, over `idleSeconds`, for the rate of passes that find nothing (ms/s);
 *   2. from the submit of N one-step jobs (`true`) until every job record is gone.
 * Printed: (2) / N, and (2) less the idle rate over the same time, / N: the work the jobs
 * themselves cost the reaper. Then, with the N jobs' keys left by a reaper with a day's retention
 * (RETAINED=1), the extra CPU of one pass per retained job: what each pass of the retention
 * costs a finished job. Each twice: with a full scan every pass (`walk`, as before the state
 * indexes) and with the default hourly one (`index`).
 *
 *   npx tsc -b && npx vite-node test/bench/reaper-per-job.bench.ts [jobs=100] [idleSeconds=30]
 *
 * REAPER_BENCH_MODES=index (or walk) runs one way only; REAPER_BENCH_SANDBOX_GRACE=120 gives
 * the reaper the service's default sandbox grace; REAPER_PROF_DIR=<dir> runs the reaper
 * with `--cpu-prof` into that directory (written when it exits; summarise with
 * scripts/cpu-profile-summary.mjs, skipping the start-up seconds).
 *
 * REAPER_BENCH_BASELINE=<root of another checkout, built> runs that build's reaper too, at the
 * same time, on a stack and private redis-server of its own (the other services are this
 * build's): before and after under the same load. REAPER_BENCH_WARMUP=<n> (default 10): jobs
 * run and reaped right after the stack starts, before the settle, so the run window holds the
 * steady state, not the one-offs of a process's first job (the job schema's zod compile, the
 * delete scripts read from disk: ~80 ms, 0.8 ms per job of 100; docs/benchmarks.md part 6).
 */
import { sleep } from '@sandstream/bus';
import { processRunTimeMs, RedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { startCommandTally } from '../helpers/command-tally.js';
import { runOneStepJobs } from '../helpers/one-step-jobs.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

const JOBS = Number(process.argv[2] ?? 100);
const IDLE_S = Number(process.argv[3] ?? 30);
const INTERVAL_S = 5;
const MODES = (process.env.REAPER_BENCH_MODES ?? 'walk,index').split(',');
const PROF_DIR = process.env.REAPER_PROF_DIR;
/**
 * REAPER_SANDBOX_GRACE_SECONDS for the reaper (default 0, as before: the reaper then races
 * pod-lifecycle to tear down each finished job's sandbox; the service's own default is 120 s,
 * by which time pod-lifecycle has destroyed it).
 */
const SANDBOX_GRACE_S = process.env.REAPER_BENCH_SANDBOX_GRACE ?? '0';
/** REAPER_BENCH_COMMANDS=1: also count the reaper's Redis commands per job (MONITOR; slows Redis). */
const COUNT_COMMANDS = process.env.REAPER_BENCH_COMMANDS === '1';
/**
 * Seconds after the stack starts before anything is measured (REAPER_BENCH_SETTLE, default 150):
 * V8's memory reducer runs once in each service 1–2 minutes after start (a Mark-Compact that gives
 * the start-up heap back, 150–300 ms of CPU; see idle-cpu.bench.ts). With the 10 s settle this
 * bench used before, it fell inside the run window in some runs and not others, 2–3 ms per job.
 */
const SETTLE_S = Number(process.env.REAPER_BENCH_SETTLE ?? 150);
const WARMUP_JOBS = Number(process.env.REAPER_BENCH_WARMUP ?? 10);
const BASELINE_ROOT = process.env.REAPER_BENCH_BASELINE;

/** Whose reaper runs: this checkout's, or the baseline's (REAPER_BENCH_BASELINE). */
interface Build {
  label: string;
  root?: string;
}
const builds: Build[] = [
  { label: 'this' },
  ...(BASELINE_ROOT ? [{ label: 'base', root: `${BASELINE_ROOT.replace(/\/$/, '')}/` }] : []),
];

/**
 * `walk`: a full scan every pass (the reaper before the state-index passes); `index`: the
 * default, a full scan hourly and passes between that read only what is due.
 */
type Mode = 'walk' | 'index';

/** Submits one-step jobs and waits until every record is gone (reaped). */
async function runAndReap(stack: Stack, prefix: string, count: number, since: number): Promise<void> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push(
      (await stack.client.submit({ id: `${prefix}${i}`, image: 'none', steps: [{ command: 'true' }] })).jobId,
    );
  }
  for (;;) {
    const left = await Promise.all(ids.map((id) => stack.client.get(id)));
    if (left.every((r) => !r)) return;
    if (performance.now() - since > 300_000) throw new Error('jobs not reaped within 5 minutes');
    await sleep(500);
  }
}

async function measure(retentionSeconds: number, mode: Mode, build: Build): Promise<void> {
  const tag = builds.length > 1 ? `${build.label}, ${mode}` : mode;
  const server = await RedisServer.start();
  const url = `redis://127.0.0.1:${server.port}`;
  const stack = await startStack({
    label: 'reap-job',
    env: {
      REDIS_URL: url,
      REAPER_INTERVAL_SECONDS: String(INTERVAL_S),
      REAPER_RETENTION_SECONDS: String(retentionSeconds),
      REAPER_SANDBOX_GRACE_SECONDS: SANDBOX_GRACE_S,
      REAPER_FULL_SCAN_SECONDS: mode === 'walk' ? String(INTERVAL_S) : '3600',
    },
    redis: () => new Redis(url),
    ...(PROF_DIR ? { nodeArgsOf: { reaper: ['--cpu-prof', `--cpu-prof-dir=${PROF_DIR}`] } } : {}),
    ...(build.root ? { rootOf: { reaper: build.root } } : {}),
  });
  try {
    const reaper = stack.services.get('reaper')?.[0]?.child.pid ?? 0;
    const cpu = () => processRunTimeMs(reaper);
    if (WARMUP_JOBS > 0) await runAndReap(stack, `${stack.namespace}-w`, WARMUP_JOBS, performance.now());
    await sleep(SETTLE_S * 1000);
    let at = cpu();
    let t = performance.now();
    await sleep(IDLE_S * 1000);
    const idlePerS = (cpu() - at) / ((performance.now() - t) / 1000);
    at = cpu();
    t = performance.now();
    const prefix = `${stack.namespace}-r`;
    const reaperOutput = () => stack.services.get('reaper')?.[0]?.output() ?? '';
    const outputAt = reaperOutput().length;
    if (retentionSeconds === 0) {
      const tally = COUNT_COMMANDS ? await startCommandTally(url, 'reaper') : undefined;
      // Jobs are reaped a pass after they end, maybe before a poll sees them terminal: submitted
      // here, then waited for until every record is gone.
      await runAndReap(stack, prefix, JOBS, t);
      const seconds = (performance.now() - t) / 1000;
      const total = cpu() - at;
      console.log(
        `reaper (${tag}), ${JOBS} one-step jobs run and reaped in ${seconds.toFixed(1)} s: ` +
          `idle ${idlePerS.toFixed(2)} ms/s; ${(total / JOBS).toFixed(2)} ms/job in all, ` +
          `${((total - idlePerS * seconds) / JOBS).toFixed(2)} ms/job above idle`,
      );
      // At grace 0 each of these is a teardown pod-lifecycle's destroy was doing too (or had done).
      const torn = stack
        .logs()
        .split('\n')
        .filter((line) => line.includes('reaper destroyed an orphaned sandbox') && line.includes(prefix));
      // Redis users the reaper deleted itself in the window (each with a walk of what it stored).
      const usersDeleted = reaperOutput()
        .slice(outputAt)
        .split('\n')
        .filter((line) => line.includes('"reaper pass done"'))
        .reduce((sum, line) => sum + (Number(/"aclUsersDeleted":(\d+)/.exec(line)?.[1]) || 0), 0);
      console.log(
        `reaper (${tag}) tore down ${torn.length} of the ${JOBS} jobs' sandboxes itself ` +
          `and deleted ${usersDeleted} Redis users`,
      );
      if (tally) {
        const counts = [...(await tally.stop())].sort((a, b) => b[1] - a[1]);
        const all = counts.reduce((sum, [, n]) => sum + n, 0);
        console.log(
          `reaper (${tag}) Redis commands per job, idle passes included: ${(all / JOBS).toFixed(2)} ` +
            `(${counts.map(([c, n]) => `${c} ${(n / JOBS).toFixed(2)}`).join(', ')})`,
        );
      }
      return;
    }
    // Retained: passes over the N finished jobs, against the idle passes before them.
    const run = await runOneStepJobs(stack.client, prefix, JOBS);
    if (run.failed > 0) console.log(`(${run.failed} jobs failed)`);
    await sleep(2 * INTERVAL_S * 1000);
    at = cpu();
    t = performance.now();
    await sleep(IDLE_S * 1000);
    const seconds = (performance.now() - t) / 1000;
    const perS = (cpu() - at) / seconds;
    const perPassPerJob = ((perS - idlePerS) * INTERVAL_S) / JOBS;
    console.log(
      `reaper (${tag}) with ${JOBS} finished jobs retained: ${perS.toFixed(2)} ms/s against ${idlePerS.toFixed(2)} idle: ` +
        `${perPassPerJob.toFixed(3)} ms per retained job per pass; a day's retention at the default ` +
        `60 s interval: ${(perPassPerJob * 1440).toFixed(1)} ms per job`,
    );
  } finally {
    await stack.stop();
    await server.stop();
  }
}

// Both ways in the same run, interleaved, so the machine's load weighs on both alike.
const modes = (['walk', 'index'] as const).filter((mode) => MODES.includes(mode));
// The builds at once (each on its own stack and redis-server): the same load on both.
const each = (retention: number, mode: Mode) => Promise.all(builds.map((b) => measure(retention, mode, b)));
for (const mode of modes) await each(0, mode);
if (process.env.RETAINED === '1') for (const mode of modes) await each(86_400, mode);
