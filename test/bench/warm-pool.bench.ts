/**
 * Warm pools (issue 19 §3): the four services as processes on a private redis-server, a
 * templates file with a pool, on the in-process backend and (when the engine and the carrier are
 * there) on Docker. In one loop, per run:
 * - the bare-Node floor: spawn `node -e "console.log('hi')"` until its first stdout byte;
 * - submit -> first stdout line of a job `echo hi` claimed from the pool (a warm hit);
 * - `sandboxes.create()` -> first output line of `exec('echo hi')`, also warm.
 * The pool is let refill between runs (not timed). Then jobs/s for a burst the size of the pool,
 * warm (every job a hit) against cold (the same template without a pool).
 *
 *   npx tsc -b && SANDSTREAM_CARRIER_IMAGE=sandstream/agent-carrier:dev \
 *     npx vite-node test/bench/warm-pool.bench.ts [runs] [burst] [inprocess|docker|both]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKeySpace, WarmPoolStore } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import {
  findCarrierImage,
  startRedisServer,
  startServices,
  summarize,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { destroyPoolMembers } from '../helpers/pool-members.js';

const RUNS = Number(process.argv[2] ?? 50);
const BURST = Number(process.argv[3] ?? 8);
const WHICH = process.argv[4] ?? 'both';

/** The bare-Node floor: a fresh node process until its first stdout byte. */
function nodeFloorMs(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(process.execPath, ['-e', 'console.log("hi")'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    child.stdout.once('data', () => resolve(performance.now() - t));
    child.once('error', reject);
  });
}

async function firstLineMs(client: SandstreamClient, template: string, id: string): Promise<number> {
  const t = performance.now();
  const { jobId } = await client.submit({ id, template, steps: [{ command: 'echo', args: ['hi'] }] });
  for await (const item of client.follow(jobId)) {
    if (item.type === 'output' && item.line === 'hi') return performance.now() - t;
  }
  throw new Error(`job ${jobId} ended without printing hi`);
}

async function createToExecMs(client: SandstreamClient, template: string): Promise<number> {
  const t = performance.now();
  const sandbox = await client.sandboxes.create({ template });
  let first = 0;
  await sandbox.exec(['echo', 'hi'], {
    onStdout: () => {
      first ||= performance.now() - t;
    },
  });
  await sandbox.close();
  return first;
}

async function burst(client: SandstreamClient, template: string, prefix: string): Promise<number> {
  const t = performance.now();
  const ids = await Promise.all(
    Array.from({ length: BURST }, async (_, i) => {
      const { jobId } = await client.submit({ id: `${prefix}${i}`, template, steps: [{ command: 'true' }] });
      return jobId;
    }),
  );
  const records = await Promise.all(ids.map((id) => client.wait(id, { timeoutMs: 120_000 })));
  const failed = records.filter((r) => r.state !== 'succeeded').length;
  if (failed > 0) throw new Error(`${failed} burst jobs failed`);
  return BURST / ((performance.now() - t) / 1000);
}

async function bench(name: string, image: string, env: Record<string, string>): Promise<void> {
  const own = await startRedisServer({ args: ['--maxclients', '10000'] });
  const scratch = mkdtempSync(join(tmpdir(), 'bench-pools-'));
  const templates = join(scratch, 'templates.yaml');
  writeFileSync(
    templates,
    `templates:\n  warm:\n    image: ${image}\n    pool: { min: ${BURST}, max: ${BURST} }\n  cold:\n    image: ${image}\n`,
  );
  const namespace = uniqueNamespace('wp');
  const services = await startServices({
    ...env,
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDSTREAM_TEMPLATES_FILE: templates,
    SCHEDULER_GLOBAL_SLOTS: String(BURST * 2),
    SCHEDULER_TENANT_SLOTS: String(BURST * 2),
    POOL_KEEPER_INTERVAL_MS: '100',
    POOL_REFILL_CONCURRENCY: '4',
    LOG_LEVEL: 'warn',
  });
  const redis = new Redis(own.url);
  const client = new SandstreamClient({ redis, namespace });
  const pools = new WarmPoolStore(redis, createKeySpace(namespace));
  const readyCount = async () =>
    (await pools.all()).filter((m) => m.pool === 'warm' && m.state === 'ready').length;
  const waitReady = async (count: number) => {
    const deadline = Date.now() + 120_000;
    while ((await readyCount()) < count) {
      if (Date.now() > deadline) throw new Error(`pool not refilled to ${count}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  try {
    await waitReady(BURST);
    // Warm-up: first runs load code paths in every process.
    await firstLineMs(client, 'warm', `${namespace}-warmup`);
    await nodeFloorMs();
    const floor: number[] = [];
    const submit: number[] = [];
    const create: number[] = [];
    let misses = 0;
    for (let i = 0; i < RUNS; i++) {
      await waitReady(BURST);
      floor.push(await nodeFloorMs());
      submit.push(await firstLineMs(client, 'warm', `${namespace}-s${i}`));
      if ((await client.get(`${namespace}-s${i}`))?.sandbox?.start?.kind !== 'warm') misses++;
      await waitReady(BURST);
      create.push(await createToExecMs(client, 'warm'));
    }
    const f = summarize(floor);
    const s = summarize(submit);
    const c = summarize(create);
    await waitReady(BURST);
    const warmRate = await burst(client, 'warm', `${namespace}-bw`);
    const coldRate = await burst(client, 'cold', `${namespace}-bc`);
    console.log(`\n## warm pool, ${name} backend (${RUNS} runs, pool of ${BURST})`);
    console.log(
      `bare-Node floor (spawn node -e, first stdout): p50 ${f.p50.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms`,
    );
    console.log(
      `submit -> first stdout of echo hi, warm hit: p50 ${s.p50.toFixed(1)} ms (${(s.p50 / f.p50).toFixed(2)}x floor), p99 ${s.p99.toFixed(1)} ms; misses ${misses}`,
    );
    console.log(
      `sandboxes.create() -> first exec output, warm: p50 ${c.p50.toFixed(1)} ms (${(c.p50 / f.p50).toFixed(2)}x floor), p99 ${c.p99.toFixed(1)} ms`,
    );
    console.log(
      `burst of ${BURST} one-step jobs: warm ${warmRate.toFixed(1)} jobs/s, cold ${coldRate.toFixed(1)} jobs/s (${(warmRate / coldRate).toFixed(2)}x)`,
    );
  } catch (err) {
    const podLifecycle = services.find((s) => s.name === 'pod-lifecycle');
    console.error(podLifecycle?.output().slice(-3000));
    throw err;
  } finally {
    await client.close();
    for (const s of services) await s.stop();
    await destroyPoolMembers(redis, namespace, env);
    redis.disconnect();
    await own.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (WHICH !== 'docker') await bench('in-process', 'local', { SANDBOX_TYPE: 'inprocess' });
  const carrier = findCarrierImage();
  if (WHICH !== 'inprocess' && carrier) {
    await bench('Docker', 'sandstream/debian:bookworm', {
      SANDBOX_TYPE: 'docker',
      SANDSTREAM_DOCKER_NETWORK: 'host',
      SANDSTREAM_ALLOW_OPEN_REDIS: '1',
      SANDSTREAM_AGENT_CARRIER_IMAGE: carrier,
    });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
