#!/usr/bin/env node
/**
 * Sandbox cold start: create -> agent ready (heartbeat seen), per backend, against
 * `docker run --rm <same image> true` measured in the same run, interleaved so that machine load
 * hits every variant alike. Runs the built dist/ (npx tsc -b libs/sandbox agent first) and needs
 * the local images (scripts/images/build-all.sh) and Redis.
 *
 *   node libs/sandbox/bench/cold-start.mjs [--iterations 8] [--image sandstream/debian:bookworm]
 *        [--carrier sandstream/agent-carrier:dev] [--redis-url redis://127.0.0.1:6379] [--json]
 *
 * Prints a Markdown table (or JSON) for docs/benchmarks.md, section "Sandbox backends".
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs, promisify } from 'node:util';
import { sandboxKeys } from '@sandstream/wire';
import Dockerode from 'dockerode';
import { Redis } from 'ioredis';
import { DockerBackend, InProcessBackend, SandboxSpecSchema } from '../dist/index.js';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    iterations: { type: 'string', default: '8' },
    image: { type: 'string', default: 'sandstream/debian:bookworm' },
    carrier: {
      type: 'string',
      default: process.env.SANDSTREAM_AGENT_CARRIER_IMAGE ?? 'sandstream/agent-carrier:dev',
    },
    'redis-url': { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    json: { type: 'boolean', default: false },
  },
});
const iterations = Number(values.iterations);
if (!Number.isInteger(iterations) || iterations < 1 || iterations > 1000) {
  throw new Error(`--iterations must be a whole number from 1 to 1000 (got ${values.iterations})`);
}

const redis = new Redis(values['redis-url']);
const docker = new Dockerode();
const tag = randomBytes(3).toString('hex');
const registryKey = `sandstream:bench:inprocess:${tag}`;
// The bench's Redis is usually the loopback one with an open `default` user: measured on the host
// network as before, so figures stay comparable (a bridge adds its own, separate cost).
const benchNetwork = { defaultNetwork: 'host', allowOpenRedis: true };
const backends = {
  'docker, per-job agent volume': new DockerBackend({
    docker,
    redis,
    carrierImage: values.carrier,
    agentVolume: 'per-job',
    ...benchNetwork,
  }),
  'docker, cached agent volume': new DockerBackend({
    docker,
    redis,
    carrierImage: values.carrier,
    agentVolume: 'cached',
    ...benchNetwork,
  }),
  'in-process (node child)': new InProcessBackend({ redis, registryKey }),
};

/** @param {import('../dist/index.js').SandboxBackend} backend */
async function startOnce(backend, i) {
  const jobId = `bench-${tag}-${i}-${randomBytes(2).toString('hex')}`;
  const spec = SandboxSpecSchema.parse({ image: values.image });
  const started = performance.now();
  const ref = await backend.create({
    jobId,
    tenant: 'bench',
    spec,
    agent: { redisUrl: values['redis-url'], keyStyle: 'tagged', heartbeatIntervalMs: 1000 },
  });
  const created = performance.now();
  const heartbeat = sandboxKeys(jobId, 'tagged').heartbeat;
  await backend.waitReady(ref, 60_000, { isAgentAlive: async () => (await redis.exists(heartbeat)) === 1 });
  const ready = performance.now();
  await backend.destroy(ref, { graceMs: 5000, removeOutputKeys: true });
  return { total: ready - started, create: created - started };
}

async function dockerRunTrue() {
  const started = performance.now();
  await run('docker', ['run', '--rm', '--network', 'host', values.image, 'true']);
  return { total: performance.now() - started };
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const summarize = (samples) => ({
  median: quantile(
    samples.map((s) => s.total),
    0.5,
  ),
  p90: quantile(
    samples.map((s) => s.total),
    0.9,
  ),
  createMedian:
    samples[0]?.create === undefined
      ? undefined
      : quantile(
          samples.map((s) => s.create),
          0.5,
        ),
});

// Warm-up, not measured: image layers in the page cache, the cached agent volume filled once.
await dockerRunTrue();
for (const backend of Object.values(backends)) await startOnce(backend, -1);

const samples = {
  'docker run --rm <image> true': [],
  ...Object.fromEntries(Object.keys(backends).map((k) => [k, []])),
};
const loadBefore = loadavg()[0];
for (let i = 0; i < iterations; i++) {
  samples['docker run --rm <image> true'].push(await dockerRunTrue());
  for (const [name, backend] of Object.entries(backends)) samples[name].push(await startOnce(backend, i));
}
const loadAfter = loadavg()[0];
redis.disconnect();

const baseline = summarize(samples['docker run --rm <image> true']).median;
const rows = Object.entries(samples).map(([name, s]) => {
  const sum = summarize(s);
  return { name, ...sum, ratio: sum.median / baseline };
});
if (values.json) {
  console.log(JSON.stringify({ image: values.image, iterations, loadBefore, loadAfter, rows }, null, 2));
} else {
  const ms = (v) => (v === undefined ? '' : `${Math.round(v)}`);
  console.log(
    `image ${values.image}, ${iterations} interleaved iterations, load average ${loadBefore.toFixed(1)} -> ${loadAfter.toFixed(1)}\n`,
  );
  console.log('| variant | median ms | p90 ms | create() median ms | median / docker run |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${ms(r.median)} | ${ms(r.p90)} | ${ms(r.createMedian)} | ${r.ratio.toFixed(2)}x |`,
    );
  }
}
