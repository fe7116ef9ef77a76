/**
 * Readiness by event (issue 32 §1): how long after a sandbox's record turns `ready` (its
 * `readyAt`, stamped by the step-dispatcher) `sandboxes.create()` resolves, and what a create
 * costs against a bare start, all in one loop. The four services and the API as processes on a
 * private redis-server, a templates file with a warm pool (`warm`) and without (`cold`). Per
 * backend (in-process; Docker when the engine and a carrier are there), each run times in turn:
 *
 * - the baselines: `node -e 0` (spawn to exit) and, on Docker, `docker run --rm <image> true`;
 * - cold `create()` over Redis (the event wait), then `exec(['echo', 'hi'])` to its first line;
 * - cold `create({ wait: false })` followed by the wait this change replaced (the record polled
 *   with a backoff of 10, 20, 40 … 250 ms, as libs/client sandbox-wait.ts did): the "before";
 * - cold `create()` over HTTP (the API waits server-side, by event);
 * - a warm claim, `create({ template: 'warm' })`, over Redis (event) and polled (before).
 *
 * The gap is Date.now() when the call resolved minus the record's readyAt (one machine, one
 * clock, whole milliseconds).
 *
 *   npx tsc -b && npx vite-node test/bench/ready-wait.bench.ts [runs=20] [inprocess|docker|both]
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createKeySpace, type SandboxRecord, WarmPoolStore } from '@sandstream/bus';
import { type Sandbox, SandstreamClient } from '@sandstream/client';
import {
  findCarrierImage,
  freePort,
  startRedisServer,
  startService,
  startServices,
  summarize,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { destroyPoolMembers } from '../helpers/pool-members.js';

const run = promisify(execFile);
const RUNS = Number(process.argv[2] ?? 20);
const WHICH = process.argv[3] ?? 'both';
const POOL = 2;

function nodeZeroMs(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    child.once('exit', () => resolve(performance.now() - t));
    child.once('error', reject);
  });
}

async function dockerTrueMs(image: string): Promise<number> {
  const t = performance.now();
  await run('docker', ['run', '--rm', '--network', 'host', image, 'true']);
  return performance.now() - t;
}

/** The wait this change replaced: the record read with a backoff of 10 … 250 ms. */
async function pollReady(client: SandstreamClient, id: string): Promise<SandboxRecord> {
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const record = await client.sandboxes.get(id);
    if (record?.state === 'ready') return record;
    if (!record || record.state === 'closed' || record.state === 'failed')
      throw new Error(`sandbox ${id} is ${record?.state ?? 'gone'}`);
    await new Promise((r) => setTimeout(r, pause));
  }
}

interface Timed {
  /** create() call to resolved, ms. */
  ms: number;
  /** resolved minus the record's readyAt, ms. */
  gap: number;
  sandbox: Sandbox;
}

async function timedCreate(
  client: SandstreamClient,
  template: string,
  how: 'event' | 'poll',
): Promise<Timed> {
  const t = performance.now();
  const sandbox = await client.sandboxes.create({ template }, how === 'poll' ? { wait: false } : {});
  if (how === 'poll') await pollReady(client, sandbox.id);
  const ms = performance.now() - t;
  const resolvedAt = Date.now();
  const record = await client.sandboxes.get(sandbox.id);
  if (record?.readyAt === undefined) throw new Error(`sandbox ${sandbox.id} has no readyAt`);
  return { ms, gap: resolvedAt - record.readyAt, sandbox };
}

async function firstLineMs(sandbox: Sandbox): Promise<number> {
  const t = performance.now();
  let first = 0;
  await sandbox.exec(['echo', 'hi'], {
    onStdout: () => {
      first ||= performance.now() - t;
    },
  });
  return first;
}

const line = (name: string, xs: number[], base?: { name: string; p50: number }) => {
  const s = summarize(xs);
  const ratio = base ? ` (${(s.p50 / base.p50).toFixed(2)}x ${base.name})` : '';
  return `${name}: p50 ${s.p50.toFixed(1)} ms${ratio}, p99 ${s.p99.toFixed(1)} ms`;
};

async function bench(name: string, image: string, env: Record<string, string>): Promise<void> {
  const own = await startRedisServer({ args: ['--maxclients', '10000'] });
  const scratch = mkdtempSync(join(tmpdir(), 'bench-ready-'));
  const templates = join(scratch, 'templates.yaml');
  writeFileSync(
    templates,
    `templates:\n  warm:\n    image: ${image}\n    pool: { min: ${POOL}, max: ${POOL} }\n  cold:\n    image: ${image}\n`,
  );
  const namespace = uniqueNamespace('rw');
  const serviceEnv = {
    ...env,
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDSTREAM_TEMPLATES_FILE: templates,
    SCHEDULER_GLOBAL_SLOTS: '16',
    SCHEDULER_TENANT_SLOTS: '16',
    POOL_KEEPER_INTERVAL_MS: '100',
    LOG_LEVEL: 'warn',
  };
  const services = await startServices(serviceEnv);
  const port = await freePort();
  const api = await startService('api', { ...serviceEnv, API_PORT: String(port), API_ANONYMOUS: 'loopback' });
  const redis = new Redis(own.url);
  const client = new SandstreamClient({ redis, namespace });
  const http = new SandstreamClient({ url: `http://127.0.0.1:${port}` });
  const pools = new WarmPoolStore(redis, createKeySpace(namespace));
  const poolFull = async () => {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const ready = (await pools.all()).filter((m) => m.pool === 'warm' && m.state === 'ready').length;
      if (ready >= POOL) return;
      if (Date.now() > deadline) throw new Error('pool not refilled');
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const series: Record<string, number[]> = {};
  const add = (key: string, value: number) => {
    series[key] ??= [];
    series[key].push(value);
  };
  const closeAll = (sandboxes: Sandbox[]) => Promise.all(sandboxes.map((s) => s.close().catch(() => {})));
  try {
    await poolFull();
    // Warm-up: the first runs load code paths in every process.
    await closeAll([(await timedCreate(client, 'cold', 'event')).sandbox]);
    await nodeZeroMs();
    if (name === 'Docker') await dockerTrueMs(image);
    for (let i = 0; i < RUNS; i++) {
      add('node -e 0', await nodeZeroMs());
      if (name === 'Docker') add('docker run --rm true', await dockerTrueMs(image));
      // Event and poll take turns at going first, so neither always runs after the other's clean-up.
      const [first, second] = i % 2 === 0 ? (['event', 'poll'] as const) : (['poll', 'event'] as const);
      const cold = new Map<string, Timed>();
      for (const how of [first, second]) {
        const timed = await timedCreate(client, 'cold', how);
        add(`cold create, ${how}`, timed.ms);
        add(`gap cold, ${how}`, timed.gap);
        add(`cold create -> first output, ${how}`, timed.ms + (await firstLineMs(timed.sandbox)));
        cold.set(how, timed);
      }
      const overHttp = await timedCreate(http, 'cold', 'event');
      add('cold create over HTTP, event', overHttp.ms);
      add('gap cold over HTTP (API waits by event)', overHttp.gap);
      await closeAll([...[...cold.values()].map((t) => t.sandbox), overHttp.sandbox]);
      for (const how of [first, second]) {
        await poolFull();
        const warm = await timedCreate(client, 'warm', how);
        add(`warm claim, ${how}`, warm.ms);
        add(`gap warm, ${how}`, warm.gap);
        await closeAll([warm.sandbox]);
      }
    }
    const nodeBase = { name: 'node -e 0', p50: summarize(series['node -e 0'] ?? []).p50 };
    const dockerBase = series['docker run --rm true']
      ? { name: 'docker run', p50: summarize(series['docker run --rm true']).p50 }
      : undefined;
    console.log(`\n## ${name} backend, ${RUNS} runs (load ${(loadavg()[0] as number).toFixed(1)})`);
    for (const [key, xs] of Object.entries(series)) {
      const base = key.startsWith('gap')
        ? undefined
        : key.includes('first output') && dockerBase
          ? dockerBase
          : key.includes('create') || key.includes('claim')
            ? nodeBase
            : undefined;
      console.log(line(key, xs, base));
    }
  } catch (err) {
    console.error(services.map((s) => s.output().slice(-2000)).join('\n'));
    throw err;
  } finally {
    await client.close();
    await http.close();
    await api.stop();
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
    await bench('Docker', process.env.BENCH_IMAGE ?? 'sandstream/debian:bookworm', {
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
