/**
 * The HTTP API (services/api) against what it fronts, each figure against a baseline measured
 * in the same run (the four services and the API as processes, in-process backend, a private
 * redis-server):
 *
 * 1. `exec(['true'])` round trip over HTTP (POST /v1/sandboxes/{id}/exec, bearer key) against
 *    the SDK's Redis transport on the same sandbox, in alternating blocks. Goal: ≤ +1 ms at p50.
 * 2. GET /v1/jobs/{id} requests/s (auth, validation, rate limit, response schema) against a
 *    bare route on the same framework doing the same Redis read without auth
 *    (test/bench/bare-job-route.mjs), both in processes of their own, driven by autocannon.
 *    Goal: ≥ 0.5×.
 * 3. Output lines/s to one client: the SSE of GET /v1/jobs/{id}/events against the SDK's
 *    follow() on the same finished job's stream, both reading 500 entries per round trip (the
 *    API forwards the SDK's followPages()). Goal: ≥ 0.8×.
 *
 *   npm run build && npx vite-node test/bench/api.bench.ts [rounds] [seconds]
 */
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { keepAliveClient, summarize } from '@sandstream/test-support';
import autocannon from 'autocannon';
import { startApiStack } from '../helpers/api-stack.js';

const ROUNDS = Number(process.argv[2] ?? 400);
const SECONDS = Number(process.argv[3] ?? 8);
const LINES = 9000;
const SSE_READS = 30;
/** Which of the three to run (API_BENCH_PARTS=2,3), all by default. */
const PARTS = new Set((process.env.API_BENCH_PARTS ?? '1,2,3').split(',').map(Number)); // under the events stream's cap (~10,000 entries), so every line is there

const ms = (n: number) => `${n.toFixed(2)} ms`;

const s = await startApiStack({
  label: 'api-bench',
  apiEnv: { API_RATE_LIMIT_PER_MINUTE: '1000000' },
  ...(process.env.API_BENCH_PROFILE
    ? { apiNodeArgs: ['--cpu-prof', `--cpu-prof-dir=${process.env.API_BENCH_PROFILE}`] }
    : {}),
});
const { key } = await s.key('bench');
const auth = { authorization: `Bearer ${key}` };
try {
  // ---- 1. exec round trip
  const id = await s.createSandbox(key);
  const sandbox = s.stack.client.sandboxes.handle(id);
  const sdk: number[] = [];
  const http: number[] = [];
  /** The HTTP floor: an authenticated route that asks Redis nothing (GET /v1/pools). */
  const floor: number[] = [];
  const body = JSON.stringify({ command: ['true'] });
  const client = keepAliveClient(auth);
  const post = (path: string, payload: string) => client.send(`${s.url}${path}`, 'POST', payload);
  const send = (method: string, path: string) => client.send(`${s.url}${path}`, method);
  for (let block = 0; PARTS.has(1) && block < 10 + ROUNDS / 20; block++) {
    for (let i = 0; i < 20; i++) {
      let t = performance.now();
      await sandbox.exec(['true']);
      const a = performance.now() - t;
      t = performance.now();
      JSON.parse(await post(`/v1/sandboxes/${id}/exec`, body));
      const b = performance.now() - t;
      t = performance.now();
      JSON.parse(await send('GET', '/v1/pools'));
      const c = performance.now() - t;
      // The first blocks warm both paths up (JIT, connections); not counted.
      if (block >= 10) {
        sdk.push(a);
        http.push(b);
        floor.push(c);
      }
    }
  }
  if (PARTS.has(1)) {
    const sdkStats = summarize(sdk);
    const httpStats = summarize(http);
    console.log(`\n1. exec(['true']) round trip, ${sdk.length} each, alternating`);
    console.log(`   SDK (Redis transport): p50 ${ms(sdkStats.p50)}  p99 ${ms(sdkStats.p99)}`);
    console.log(`   HTTP API:              p50 ${ms(httpStats.p50)}  p99 ${ms(httpStats.p99)}`);
    console.log(`   HTTP - SDK at p50: +${ms(httpStats.p50 - sdkStats.p50)} (goal ≤ +1 ms)`);
    const floorStats = summarize(floor);
    console.log(
      `   (HTTP floor, GET /v1/pools with the same client: p50 ${ms(floorStats.p50)}  p99 ${ms(floorStats.p99)})`,
    );
  }
  // Closed before parts 2 and 3: a live sandbox (its agent, its keepalive) would take CPU from
  // them on a two-core machine, and more from the three-process HTTP chain than from the SDK's.
  await fetch(`${s.url}/v1/sandboxes/${id}`, { method: 'DELETE', headers: auth });

  // ---- 2. GET /v1/jobs/{id} against a bare route
  const submitted = await fetch(`${s.url}/v1/jobs`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ steps: [{ command: 'sh', args: ['-c', `seq 1 ${LINES}`] }] }),
  });
  const { jobId } = (await submitted.json()) as { jobId: string };
  await s.stack.client.wait(jobId, { timeoutMs: 60_000 });
  const bare = spawn(process.execPath, ['test/bench/bare-job-route.mjs'], {
    env: { ...process.env, REDIS_URL: s.redisUrl },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const barePort = await new Promise<string>((resolve) =>
    createInterface({ input: bare.stdout! }).once('line', (line) => resolve(line.trim())),
  );
  const load = async (url: string, headers: Record<string, string>) => {
    const result = await autocannon({ url, connections: 16, duration: SECONDS, headers });
    if (result.non2xx > 0 || result.errors > 0)
      throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
    return result.requests.average;
  };
  if (PARTS.has(2)) {
    await load(`${s.url}/v1/jobs/${jobId}`, auth); // warm-up
    await load(`http://127.0.0.1:${barePort}/bare/jobs/${jobId}`, {});
    const apiRps = await load(`${s.url}/v1/jobs/${jobId}`, auth);
    const bareRps = await load(`http://127.0.0.1:${barePort}/bare/jobs/${jobId}`, {});
    console.log(`\n2. GET a job's record, 16 connections, ${SECONDS} s each (autocannon)`);
    console.log(`   bare route (no auth):  ${bareRps.toFixed(0)} req/s`);
    console.log(`   GET /v1/jobs/{id}:     ${apiRps.toFixed(0)} req/s`);
    console.log(`   ratio: ${(apiRps / bareRps).toFixed(2)}× (goal ≥ 0.5×)`);
  }

  // ---- 3. SSE against the SDK's follower, on the finished job's LINES lines
  const followSdk = async () => {
    let lines = 0;
    for await (const item of s.stack.client.follow(jobId)) if (item.type === 'output') lines++;
    return lines;
  };
  bare.kill('SIGTERM');
  client.close();
  // A plain node:http client reading the stream as it comes (no web-streams layer).
  const followSse = () =>
    new Promise<number>((resolve, reject) => {
      const req = request(`${s.url}/v1/jobs/${jobId}/events`, { headers: auth }, (res) => {
        res.setEncoding('utf8');
        let buffer = '';
        let lines = 0;
        res.on('data', (chunk: string) => {
          buffer += chunk;
          const blocks = buffer.split('\n\n');
          buffer = blocks.pop() ?? '';
          for (const block of blocks) {
            if (!block.includes('event: output')) continue;
            JSON.parse(block.slice(block.indexOf('data: ') + 6));
            lines++;
          }
        });
        res.on('end', () => resolve(lines));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  const rates = { sdk: [] as number[], sse: [] as number[] };
  // 30 reads each (after 2 not counted), alternating: one read is ~30 ms, so a median of fewer
  // is moved by whichever other process got the cores at that moment.
  for (let round = 0; PARTS.has(3) && round < SSE_READS + 2; round++) {
    for (const [name, follow] of [
      ['sdk', followSdk],
      ['sse', followSse],
    ] as const) {
      const t = performance.now();
      const lines = await follow();
      if (lines !== LINES) throw new Error(`${name} saw ${lines} lines, not ${LINES}`);
      if (round >= 2) rates[name].push(lines / ((performance.now() - t) / 1000));
    }
  }
  if (PARTS.has(3)) {
    const sdkRate = summarize(rates.sdk).p50;
    const sseRate = summarize(rates.sse).p50;
    console.log(`\n3. A finished job's ${LINES} lines to one client, median of ${SSE_READS} reads each`);
    console.log(`   SDK follow():          ${sdkRate.toFixed(0)} lines/s`);
    console.log(`   SSE /v1/jobs/{id}/events: ${sseRate.toFixed(0)} lines/s`);
    console.log(`   ratio: ${(sseRate / sdkRate).toFixed(2)}× (goal ≥ 0.8×)`);
  }
} finally {
  await s.stop();
}
