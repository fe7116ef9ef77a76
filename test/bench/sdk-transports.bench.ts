/**
 * The SDK over HTTP against the SDK over Redis, the same calls on the same services in one run
 * (the four services and the API as processes, in-process backend, a private redis-server):
 *
 * 1. `sandbox.exec(['true'])` round trip, alternating blocks of 20, p50 and p99 of each.
 * 2. `client.follow()` of a finished job's 9,000 output lines: lines/s, median of 5 reads each.
 *
 *   npm run build && npx vite-node test/bench/sdk-transports.bench.ts [rounds]
 */
import { SandstreamClient } from '@sandstream/client';
import { summarize } from '@sandstream/test-support';
import { startApiStack } from '../helpers/api-stack.js';

const ROUNDS = Number(process.argv[2] ?? 200);
const LINES = 9000;
const ms = (n: number) => `${n.toFixed(2)} ms`;

const s = await startApiStack({ label: 'sdk-bench', apiEnv: { API_RATE_LIMIT_PER_MINUTE: '1000000' } });
const redis = s.stack.client;
const http = new SandstreamClient({ url: s.url });
try {
  // ---- 1. exec round trip
  const created = await redis.sandboxes.create({ image: 'debian:bookworm-slim' });
  const viaRedis = created;
  const viaHttp = http.sandboxes.handle(created.id);
  for (let i = 0; i < 20; i++) await Promise.all([viaRedis.exec(['true']), viaHttp.exec(['true'])]);
  const samples = { redis: [] as number[], http: [] as number[] };
  for (let done = 0; done < ROUNDS; done += 20) {
    for (const [name, sandbox] of [
      ['redis', viaRedis],
      ['http', viaHttp],
    ] as const) {
      for (let i = 0; i < 20; i++) {
        const t = performance.now();
        await sandbox.exec(['true']);
        samples[name].push(performance.now() - t);
      }
    }
  }
  const r = summarize(samples.redis);
  const h = summarize(samples.http);
  console.log(
    `exec(['true']) ×${r.n}: Redis p50 ${ms(r.p50)} p99 ${ms(r.p99)}; HTTP p50 ${ms(h.p50)} p99 ${ms(h.p99)}; ` +
      `HTTP − Redis at p50 ${ms(h.p50 - r.p50)} (${(h.p50 / r.p50).toFixed(2)}×)`,
  );
  await created.close();

  // ---- 2. follow() lines/s of a finished job
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
} finally {
  await http.close();
  await s.stop();
}
