/**
 * `commands.run('true')` through the unmodified e2b SDK (its Connect server stream, through the
 * api's E2B routes) against our SDK's `exec('true')` over HTTP, on the same services in one run
 * (the four services and the API as processes, in-process backend, a private redis-server), one
 * of each per round, order alternating: p50 and p99, and the p50 ratio (goal ≤ 1.5×).
 *
 *   npm run build && npx vite-node test/bench/e2b-exec.bench.ts [rounds]
 */
import { SandstreamClient } from '@sandstream/client';
import { summarize } from '@sandstream/test-support';
import { Sandbox } from 'e2b';
import { startApiStack } from '../helpers/api-stack.js';

const ROUNDS = Number(process.argv[2] ?? 200);
const ms = (n: number) => `${n.toFixed(2)} ms`;

const s = await startApiStack({ label: 'e2b-bench', apiEnv: { API_RATE_LIMIT_PER_MINUTE: '1000000' } });
const { key } = await s.key('bench');
const ours = new SandstreamClient({ url: s.url, apiKey: key });
try {
  const e2b = await Sandbox.create('base', {
    apiKey: key,
    apiUrl: s.url,
    sandboxUrl: s.url,
    timeoutMs: 600_000,
  });
  const sandbox = await ours.sandboxes.create({ image: 'debian:bookworm-slim' });
  const ways: [string, () => Promise<unknown>][] = [
    ['e2b SDK commands.run', () => e2b.commands.run('true')],
    ['our SDK exec over HTTP', () => sandbox.exec('true')],
  ];
  for (let i = 0; i < 20; i++) for (const [, run] of ways) await run();
  const samples = new Map(ways.map(([name]) => [name, [] as number[]]));
  for (let i = 0; i < ROUNDS; i++) {
    const order = i % 2 === 0 ? ways : [...ways].reverse();
    for (const [name, run] of order) {
      const start = performance.now();
      await run();
      samples.get(name)?.push(performance.now() - start);
    }
  }
  const p50 = new Map<string, number>();
  for (const [name, values] of samples) {
    const summary = summarize(values);
    p50.set(name, summary.p50);
    console.log(`${name}: p50 ${ms(summary.p50)}, p99 ${ms(summary.p99)} (${values.length} runs)`);
  }
  const ratio = (p50.get(ways[0]?.[0] ?? '') ?? 0) / (p50.get(ways[1]?.[0] ?? '') ?? 1);
  console.log(`p50 ratio e2b / ours: ${ratio.toFixed(2)}× (goal ≤ 1.5×)`);
  await e2b.kill();
  await sandbox.close();
} finally {
  await ours.close();
  await s.stop();
}
