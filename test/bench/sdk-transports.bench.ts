/**
 * The SDK over HTTP against the SDK over Redis, the same calls on the same services in one run
 * (the four services and the API as processes, in-process backend, a private redis-server):
 *
 * 1. `sandbox.exec(['true'])` round trip, one of each per round (order rotating), p50 and p99: over
 *    Redis, over HTTP, and the same POST …/exec without the SDK, by `node:http` on one
 *    keep-alive connection (the event stream the SDK asks for, and the JSON answer).
 * 2. `client.follow()` of a finished job's 9,000 output lines: lines/s, median of 5 reads each.
 *
 *   npm run build && npx vite-node test/bench/sdk-transports.bench.ts [rounds] [parts=12]
 *
 * With API_CPU_PROF=<dir> the API runs under `--cpu-prof` into that directory.
 */
import { SandstreamClient } from '@sandstream/client';
import { keepAliveClient, summarize } from '@sandstream/test-support';
import { startApiStack } from '../helpers/api-stack.js';

const ROUNDS = Number(process.argv[2] ?? 200);
const PARTS = process.argv[3] ?? '12';
const profileDir = process.env.API_CPU_PROF;
const LINES = 9000;
const ms = (n: number) => `${n.toFixed(2)} ms`;

const s = await startApiStack({
  label: 'sdk-bench',
  apiEnv: { API_RATE_LIMIT_PER_MINUTE: '1000000' },
  ...(profileDir ? { apiNodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] } : {}),
});
const redis = s.stack.client;
const http = new SandstreamClient({ url: s.url });
try {
  // ---- 1. exec round trip
  const created = await redis.sandboxes.create({ image: 'debian:bookworm-slim' });
  const viaRedis = created;
  const viaHttp = http.sandboxes.handle(created.id);
  const rawSse = keepAliveClient({ accept: 'text/event-stream' });
  const rawJson = keepAliveClient({ accept: 'application/json' });
  const execUrl = `${s.url}/v1/sandboxes/${encodeURIComponent(created.id)}/exec`;
  const body = JSON.stringify({ command: ['true'] });
  const ways: [string, () => Promise<unknown>][] = [
    ['SDK over Redis', async () => await viaRedis.exec(['true'])],
    ['SDK over HTTP', async () => await viaHttp.exec(['true'])],
    ['raw keep-alive POST, event stream', () => rawSse.send(execUrl, 'POST', body)],
    ['raw keep-alive POST, JSON', async () => JSON.parse(await rawJson.send(execUrl, 'POST', body))],
    // What the SDK's event streams went through before they moved to node:http.
    [
      'raw fetch POST, event stream',
      async () =>
        (
          await fetch(execUrl, {
            method: 'POST',
            headers: { accept: 'text/event-stream', 'content-type': 'application/json' },
            body,
          })
        ).text(),
    ],
  ];
  const samples = new Map(ways.map(([name]) => [name, [] as number[]]));
  if (PARTS.includes('1')) {
    for (let i = 0; i < 20; i++) for (const [, exec] of ways) await exec();
    // One of each per round, the order rotating, so that the machine's load moves all alike.
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < ways.length; k++) {
        const [name, exec] = ways[(round + k) % ways.length] as (typeof ways)[number];
        const t = performance.now();
        await exec();
        samples.get(name)?.push(performance.now() - t);
      }
    }
    const sdk = summarize(samples.get('SDK over HTTP') ?? []);
    const redisSdk = summarize(samples.get('SDK over Redis') ?? []);
    const raw = summarize(samples.get('raw keep-alive POST, event stream') ?? []);
    for (const [name] of ways) {
      const x = summarize(samples.get(name) ?? []);
      console.log(`exec(['true']) ×${x.n}, ${name}: p50 ${ms(x.p50)} p99 ${ms(x.p99)}`);
    }
    console.log(
      `SDK over HTTP − SDK over Redis at p50 ${ms(sdk.p50 - redisSdk.p50)} (${(sdk.p50 / redisSdk.p50).toFixed(2)}×); ` +
        `SDK over HTTP / raw keep-alive POST (same event stream) ${(sdk.p50 / raw.p50).toFixed(2)}×`,
    );
  }
  rawSse.close();
  rawJson.close();
  await created.close();

  // ---- 2. follow() lines/s of a finished job
  if (PARTS.includes('2')) await followRates();
} finally {
  await http.close();
  await s.stop();
}

/** Part 2: follow() of a finished job through either transport. */
async function followRates(): Promise<void> {
  const { jobId } = await redis.submit({
    image: 'debian:bookworm-slim',
    steps: [{ command: 'seq', args: ['1', String(LINES)] }],
  });
  await redis.wait(jobId, { timeoutMs: 120_000 });
  const rate = async (client: SandstreamClient) => {
    const rates: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      let lines = 0;
      for await (const item of client.follow(jobId)) if (item.type === 'output') lines++;
      if (lines !== LINES) throw new Error(`followed ${lines} lines, not ${LINES}`);
      rates.push(lines / ((performance.now() - t) / 1000));
    }
    return rates.sort((a, b) => a - b)[2] as number;
  };
  const fr = await rate(redis);
  const fh = await rate(http);
  console.log(
    `follow() of ${LINES} lines: Redis ${Math.round(fr)} lines/s; HTTP ${Math.round(fh)} lines/s (${(fh / fr).toFixed(2)}×)`,
  );
}
