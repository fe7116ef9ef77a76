/**
 * The preview proxy (services/api, issue 31 §1) against the same request made straight to the
 * container's address on its bridge network, in the same run and in alternating blocks:
 *
 * 1. GET of a small page: p50 latency, proxy minus direct. Goal: ≤ +1 ms.
 * 2. A 50 MB chunked download: throughput, proxy over direct. Goal: ≥ 0.7×.
 *
 *   npm run build && npx vite-node test/bench/preview-proxy.bench.ts [rounds] [downloads]
 */
import { Agent, request } from 'node:http';
import { summarize } from '@sandstream/test-support';
import { startPreviewStack } from '../helpers/preview-stack.js';

const ROUNDS = Number(process.argv[2] ?? 400);
const DOWNLOADS = Number(process.argv[3] ?? 6);
const MB = 1024 * 1024;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

/** One GET to its end; answers the bytes read. */
const get = (url: string, headers: Record<string, string>) =>
  new Promise<number>((resolve, reject) => {
    const req = request(url, { agent, headers }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
      });
      res.once('end', () =>
        res.statusCode === 200 ? resolve(bytes) : reject(new Error(`${url}: ${res.statusCode}`)),
      );
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });

const stack = await startPreviewStack('preview-bench');
const { s, key } = stack;
try {
  const created = await s.request('/v1/sandboxes', {
    method: 'POST',
    key,
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  const record = (await created.json()) as { id: string; sandbox?: { host?: string } };
  const id = record.id;
  await stack.serve(id, 8000);
  const host = (
    (await (await s.request(`/v1/sandboxes/${id}`, { key })).json()) as { sandbox: { host: string } }
  ).sandbox.host;
  const direct = `http://${host}:8000`;
  const proxied = `${s.url}/v1/sandboxes/${id}/proxy/8000`;
  const auth = { authorization: `Bearer ${key}` };

  const timed = async (url: string, headers: Record<string, string>) => {
    const t = performance.now();
    await get(url, headers);
    return performance.now() - t;
  };
  // Warm both paths (connections, JIT) before counting.
  for (let i = 0; i < 50; i++) {
    await timed(`${direct}/`, {});
    await timed(`${proxied}/`, auth);
  }
  const directMs: number[] = [];
  const proxyMs: number[] = [];
  for (let block = 0; block < ROUNDS / 20; block++) {
    for (let i = 0; i < 20; i++) directMs.push(await timed(`${direct}/`, {}));
    for (let i = 0; i < 20; i++) proxyMs.push(await timed(`${proxied}/`, auth));
  }
  const d = summarize(directMs);
  const p = summarize(proxyMs);
  console.log(
    `page GET p50: direct ${d.p50.toFixed(2)} ms, proxy ${p.p50.toFixed(2)} ms, delta +${(p.p50 - d.p50).toFixed(2)} ms (p99 ${d.p99.toFixed(2)} / ${p.p99.toFixed(2)} ms, ${directMs.length} each)`,
  );

  const directRates: number[] = [];
  const proxyRates: number[] = [];
  const rate = async (url: string, headers: Record<string, string>) => {
    const t = performance.now();
    const bytes = await get(url, headers);
    if (bytes !== 50 * MB) throw new Error(`${url}: ${bytes} bytes`);
    return bytes / MB / ((performance.now() - t) / 1000);
  };
  await rate(`${direct}/big?mb=50`, {});
  await rate(`${proxied}/big?mb=50`, auth);
  for (let i = 0; i < DOWNLOADS; i++) {
    directRates.push(await rate(`${direct}/big?mb=50`, {}));
    proxyRates.push(await rate(`${proxied}/big?mb=50`, auth));
  }
  const dr = summarize(directRates).p50;
  const pr = summarize(proxyRates).p50;
  console.log(
    `50 MB download (median of ${DOWNLOADS}): direct ${dr.toFixed(0)} MB/s, proxy ${pr.toFixed(0)} MB/s, ratio ${(pr / dr).toFixed(2)}x`,
  );
  await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key });
} finally {
  agent.destroy();
  await stack.stop();
}
