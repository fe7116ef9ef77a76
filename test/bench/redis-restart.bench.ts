/**
 * The figures of docs/reliability.md, measured in one run: the four services as processes on a
 * private redis-server with AOF (`appendfsync everysec`), in-process sandboxes, one Redis user
 * per sandbox.
 *
 * 1. 50 jobs of 4 steps (each step appends a line to its job's file, then sleeps 1 s), Redis
 *    killed -9 while they run and started again at once from its AOF: jobs lost, steps run twice
 *    (a duplicated line), seconds until every job has finished.
 * 2. Redis killed -9 and started without any data: seconds until a new job succeeds.
 *
 *   npm run build && npx vite-node test/bench/redis-restart.bench.ts [jobs]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isTerminal } from '@sandstream/bus';
import { startRedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { startStack } from '../helpers/services-stack.js';

const JOBS = Number(process.argv[2] ?? 50);
const STEPS = 4;
const seconds = (ms: number) => (ms / 1000).toFixed(1);

async function main(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'bench-redis-restart-'));
  mkdirSync(join(scratch, 'runs'));
  const redis = await startRedisServer({ appendOnly: true });
  const stack = await startStack({
    label: 'rbench',
    redis: () => {
      const client = new Redis(redis.url, { maxRetriesPerRequest: null });
      client.on('error', () => {});
      return client;
    },
    env: {
      REDIS_URL: redis.url,
      SANDBOX_ACL: 'on',
      SCHEDULER_GLOBAL_SLOTS: String(JOBS),
      SCHEDULER_TENANT_SLOTS: String(JOBS),
      CLAIM_IDLE_MS: '2000',
      LOG_LEVEL: 'warn',
    },
  });
  try {
    const ids: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const file = join(scratch, 'runs', `j${i}`);
      const steps = Array.from({ length: STEPS }, (_, s) => ({
        command: `echo step-${s + 1} >> ${file}; sleep 1`,
        shell: true,
      }));
      ids.push((await stack.client.submit({ id: `${stack.namespace}-j${i}`, image: 'none', steps })).jobId);
    }
    const submitted = Date.now();
    // Crash once every job has run its first step and is into the next.
    const linesOf = (i: number) => {
      try {
        return readFileSync(join(scratch, 'runs', `j${i}`), 'utf8')
          .trim()
          .split('\n');
      } catch {
        return [];
      }
    };
    while (!ids.every((_, i) => linesOf(i).length >= 2)) await new Promise((r) => setTimeout(r, 100));
    const linesAtCrash = ids.reduce((n, _, i) => n + linesOf(i).length, 0);
    const crashedAt = Date.now();
    await redis.kill();
    await redis.start();
    const backAt = Date.now();

    const states = new Map<string, string>();
    let missing = 0;
    while (states.size + missing < JOBS) {
      missing = 0;
      for (const id of ids) {
        if (states.has(id)) continue;
        const record = await stack.client.get(id);
        if (!record) missing++;
        else if (isTerminal(record.state))
          states.set(id, `${record.state}${record.reason ? ` (${record.reason})` : ''}`);
      }
      if (Date.now() - backAt > 300_000) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const allDoneAt = Date.now();
    let duplicated = 0;
    let incomplete = 0;
    for (let i = 0; i < JOBS; i++) {
      const lines = linesOf(i);
      duplicated += lines.length - new Set(lines).size;
      if (states.get(ids[i] as string)?.startsWith('succeeded') && lines.length !== STEPS) incomplete++;
    }
    const outcomes: Record<string, number> = {};
    for (const s of states.values()) outcomes[s] = (outcomes[s] ?? 0) + 1;

    // 2. Restart without data.
    await redis.kill();
    await redis.start({ empty: true });
    const emptyAt = Date.now();
    const { jobId } = await stack.client.submit({
      id: `${stack.namespace}-after-empty`,
      image: 'none',
      steps: [{ command: 'echo', args: ['ok'] }],
    });
    const after = await stack.client.wait(jobId, { timeoutMs: 120_000 });
    const emptyDoneAt = Date.now();

    const report = {
      jobs: JOBS,
      stepsPerJob: STEPS,
      stepsStartedBeforeCrash: linesAtCrash,
      secondsFromSubmitToCrash: seconds(crashedAt - submitted),
      secondsRedisDown: seconds(backAt - crashedAt),
      jobsLost: missing,
      jobsNotFinishedWithin300s: JOBS - states.size - missing,
      outcomes,
      stepsRunTwice: duplicated,
      succeededWithMissingSteps: incomplete,
      secondsFromRestartUntilAllFinished: seconds(allDoneAt - backAt),
      emptyRestart: {
        newJobState: after.state,
        secondsFromRestartUntilNewJobSucceeded: seconds(emptyDoneAt - emptyAt),
      },
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    await stack.stop().catch(() => undefined);
    await redis.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
