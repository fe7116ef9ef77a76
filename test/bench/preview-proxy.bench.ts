/**
 * The preview proxy (services/api, issue 31 §1) against the same request made straight to the
 * container's address on its bridge network, in the same run and in alternating blocks:
 *
 * 1. GET of a small page: p50 latency, proxy minus direct. Goal: ≤ +1 ms.
 * 2. A 50 MB chunked download: throughput, proxy over direct. Goal: ≥ 0.7×.
 *
 * Also the API process's own CPU time (user + system, /proc) per proxied page GET: what the proxy
 * itself costs, which a loaded machine's scheduling does not inflate the way it does latency.
 *
 *   npm run build && npx vite-node test/bench/preview-proxy.bench.ts [rounds] [downloads] [block]
 *
 * `block` (default 20): requests per side before switching; 1 alternates every request, so a
 * burst of the machine's load falls on both sides alike. Also printed: the median of the paired
 * differences (each proxied GET minus the direct GET just before it).
 *
 * PREVIEW_BENCH_CPU_PROF=<dir>: the API process writes a CPU profile there (node --cpu-prof).
 * PREVIEW_BENCH_FORWARD=<mode>: the API's API_PREVIEW_FORWARD (default: its own default).
 * PREVIEW_BENCH_COMPARE=<mode>[,<mode>…]: another API process on the same stack per mode, with API_PREVIEW_FORWARD=<mode>,
 * measured in the same run, its requests alternating with the first's (the baseline of a change).
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { summarize } from '@sandstream/test-support';
import { startPreviewStack } from '../helpers/preview-stack.js';

const ROUNDS = Number(process.argv[2] ?? 400);
const DOWNLOADS = Number(process.argv[3] ?? 6);
const BLOCK = Number(process.argv[4] ?? 20);
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

/** A process's CPU time so far (user + system), in ms, from /proc (Linux). */
const cpuMsOf = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command name; in ticks of 10 ms.
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

const profileDir = process.env.PREVIEW_BENCH_CPU_PROF;
const forward = process.env.PREVIEW_BENCH_FORWARD;
const compare = process.env.PREVIEW_BENCH_COMPARE;
const stack = await startPreviewStack('preview-bench', {
  ...(profileDir ? { apiNodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] } : {}),
  ...(forward ? { apiEnv: { API_PREVIEW_FORWARD: forward } } : {}),
});
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
  const auth = { authorization: `Bearer ${key}` };
  /** Each proxying API measured: its name, the proxied origin and its process id. */
  const sides = [
    {
      name: `proxy (${forward ?? 'default'})`,
      url: `${s.url}/v1/sandboxes/${id}/proxy/8000`,
      pid: s.api.child.pid as number,
    },
  ];
  for (const mode of compare ? compare.split(',') : []) {
    const other = await s.anotherApi({ API_PREVIEW_FORWARD: mode });
    sides.push({
      name: `proxy (${mode})`,
      url: `${other.url}/v1/sandboxes/${id}/proxy/8000`,
      pid: other.api.child.pid as number,
    });
  }

  const timed = async (url: string, headers: Record<string, string>) => {
    const t = performance.now();
    await get(url, headers);
    return performance.now() - t;
  };
  // Warm both paths (connections, JIT) before counting.
  for (let i = 0; i < 50; i++) {
    await timed(`${direct}/`, {});
    for (const side of sides) await timed(`${side.url}/`, auth);
  }
  const directMs: number[] = [];
  const per = sides.map(() => ({ ms: [] as number[], cpuMs: 0, wallMs: 0, idleCpuMs: 0 }));
  // Each API's CPU while the direct blocks run (nothing of theirs passes it): its background work
  // (timers, Redis health, metrics), over as many requests, subtracted from its proxied blocks'.
  let idleWallMs = 0;
  for (let block = 0; block < ROUNDS / BLOCK; block++) {
    const idleBefore = sides.map((side) => cpuMsOf(side.pid));
    const idleStart = performance.now();
    for (let i = 0; i < BLOCK; i++) directMs.push(await timed(`${direct}/`, {}));
    sides.forEach((side, k) => {
      (per[k] as (typeof per)[number]).idleCpuMs += cpuMsOf(side.pid) - (idleBefore[k] as number);
    });
    idleWallMs += performance.now() - idleStart;
    for (const [k, side] of sides.entries()) {
      const m = per[k] as (typeof per)[number];
      const start = performance.now();
      const cpuBefore = cpuMsOf(side.pid);
      for (let i = 0; i < BLOCK; i++) m.ms.push(await timed(`${side.url}/`, auth));
      m.cpuMs += cpuMsOf(side.pid) - cpuBefore;
      m.wallMs += performance.now() - start;
    }
  }
  const d = summarize(directMs);
  for (const [k, side] of sides.entries()) {
    const m = per[k] as (typeof per)[number];
    // Background CPU at the direct blocks' rate, over the proxied blocks' time.
    const backgroundMs = idleWallMs > 0 ? (m.idleCpuMs / idleWallMs) * m.wallMs : 0;
    const p = summarize(m.ms);
    console.log(
      `${side.name} page GET p50: direct ${d.p50.toFixed(2)} ms, proxy ${p.p50.toFixed(2)} ms, delta +${(p.p50 - d.p50).toFixed(2)} ms (p99 ${d.p99.toFixed(2)} / ${p.p99.toFixed(2)} ms, ${directMs.length} each)`,
    );
    const paired = summarize(m.ms.map((ms, i) => ms - (directMs[i] as number))).p50;
    console.log(
      `${side.name} paired difference p50 (proxied GET minus its direct counterpart, blocks of ${BLOCK}): +${paired.toFixed(2)} ms`,
    );
    console.log(
      `${side.name} API CPU per proxied page GET: ${((m.cpuMs - backgroundMs) / m.ms.length).toFixed(3)} ms (user + system, ${m.ms.length} requests; ${(m.cpuMs / m.ms.length).toFixed(3)} ms before its background of ${(backgroundMs / m.ms.length).toFixed(3)} ms is taken off)`,
    );
  }

  const directRates: number[] = [];
  const rate = async (url: string, headers: Record<string, string>) => {
    const t = performance.now();
    const bytes = await get(url, headers);
    if (bytes !== 50 * MB) throw new Error(`${url}: ${bytes} bytes`);
    return bytes / MB / ((performance.now() - t) / 1000);
  };
  await rate(`${direct}/big?mb=50`, {});
  for (const side of sides) await rate(`${side.url}/big?mb=50`, auth);
  // The API's CPU per proxied download: what the proxy spends per byte, which the machine's load
  // inflates less than the throughput it allows.
  const downloads = sides.map(() => ({ rates: [] as number[], cpuMs: 0 }));
  for (let i = 0; i < DOWNLOADS; i++) {
    directRates.push(await rate(`${direct}/big?mb=50`, {}));
    // The sides' order turns each round, so that neither always follows the direct download.
    for (let j = 0; j < sides.length; j++) {
      const k = (i + j) % sides.length;
      const side = sides[k] as (typeof sides)[number];
      const m = downloads[k] as (typeof downloads)[number];
      const cpuBefore = cpuMsOf(side.pid);
      m.rates.push(await rate(`${side.url}/big?mb=50`, auth));
      m.cpuMs += cpuMsOf(side.pid) - cpuBefore;
    }
  }
  const dr = summarize(directRates).p50;
  for (const [k, side] of sides.entries()) {
    const m = downloads[k] as (typeof downloads)[number];
    const pr = summarize(m.rates).p50;
    console.log(
      `${side.name} 50 MB download (median of ${DOWNLOADS}): direct ${dr.toFixed(0)} MB/s, proxy ${pr.toFixed(0)} MB/s, ratio ${(pr / dr).toFixed(2)}x; API CPU ${(m.cpuMs / DOWNLOADS).toFixed(0)} ms per proxied download`,
    );
  }
  await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key });
} finally {
  agent.destroy();
  await stack.stop();
}
