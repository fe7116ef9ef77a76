/**
 * What tracing costs: end-to-end throughput of one-step jobs with telemetry off and on, in the
 * same run, interleaved (off, on, off, on, …) so both see the same machine load. Each round
 * starts the four services fresh (in-process backend: one real agent process per job) on a
 * private redis-server; "on" sends every span (services and agents) over OTLP/HTTP protobuf to
 * an in-process receiver that decodes them, so its CPU cost is counted against "on" as well.
 *
 *   npx tsc -b libs/telemetry agent services/scheduler services/pod-lifecycle \
 *     services/step-dispatcher services/reaper && npx vite-node test/telemetry.bench.ts [jobs] [rounds]
 */
import { isTerminal } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import { Redis } from 'ioredis';
import { startOtlpReceiver } from './helpers/otlp-receiver.js';
import { startOwnRedis } from './helpers/redis-server.js';
import { type RunningService, startService, uniqueNamespace } from './helpers/services.js';

const JOBS = Number(process.argv[2] ?? 100);
const ROUNDS = Number(process.argv[3] ?? 3);
const SERVICES = ['scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper'] as const;

interface RoundResult {
  mode: 'off' | 'on';
  jobsPerSecond: number;
  p50Ms: number;
  failed: number;
  spans: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};

async function round(redisUrl: string, mode: 'off' | 'on', otlpUrl: string, spansBefore: () => number) {
  const namespace = uniqueNamespace(`tbench-${mode}`);
  const env: Record<string, string> = {
    REDIS_URL: redisUrl,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    SCHEDULER_GLOBAL_SLOTS: '16',
    SCHEDULER_TENANT_SLOTS: '16',
    LOG_LEVEL: 'warn',
    ...(mode === 'on'
      ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl, OTEL_METRICS_EXPORTER: 'none' }
      : { SANDSTREAM_TELEMETRY: 'off' }),
  };
  const services: RunningService[] = [];
  for (const name of SERVICES) services.push(await startService(name, env));
  const redis = new Redis(redisUrl);
  const client = new SandstreamClient({ redis, prefix: namespace });
  const spans0 = spansBefore();

  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) {
    const { jobId } = await client.submit({
      id: `${namespace}-${i}`,
      image: 'none',
      steps: [{ command: 'true' }],
    });
    ids.push(jobId);
  }
  const pending = new Set(ids);
  const latencies: number[] = [];
  let failed = 0;
  while (pending.size > 0) {
    await new Promise((r) => setTimeout(r, 100));
    const list = [...pending];
    const records = await Promise.all(list.map((id) => client.get(id)));
    records.forEach((r, i) => {
      if (!r || !isTerminal(r.state)) return;
      pending.delete(list[i] as string);
      if (r.state !== 'succeeded') failed++;
      latencies.push((r.finishedAt ?? 0) - r.createdAt);
    });
    if (performance.now() - t0 > 600_000) throw new Error(`${pending.size} jobs unfinished after 10 minutes`);
  }
  const seconds = (performance.now() - t0) / 1000;
  await client.close();
  redis.disconnect();
  // Stopping flushes the services' span batches, so the span count below is complete.
  await Promise.all(services.map((s) => s.stop(15_000)));
  return {
    mode,
    jobsPerSecond: JOBS / seconds,
    p50Ms: median(latencies),
    failed,
    spans: spansBefore() - spans0,
  } satisfies RoundResult;
}

async function main(): Promise<void> {
  const own = await startOwnRedis(['--maxclients', '10000']);
  const receiver = await startOtlpReceiver();
  const results: RoundResult[] = [];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (const mode of r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        const res = await round(own.url, mode, receiver.url, () => receiver.spans.length);
        results.push(res);
        console.log(
          `round ${r + 1} ${mode}: ${res.jobsPerSecond.toFixed(2)} jobs/s, p50 ${res.p50Ms.toFixed(0)} ms, failed ${res.failed}, spans ${res.spans}`,
        );
      }
    }
  } finally {
    await receiver.close();
    await own.stop();
  }
  const of = (mode: 'off' | 'on') => results.filter((r) => r.mode === mode);
  const off = median(of('off').map((r) => r.jobsPerSecond));
  const on = median(of('on').map((r) => r.jobsPerSecond));
  console.log(`\n## telemetry cost, ${JOBS} one-step jobs per round, ${ROUNDS} rounds per mode (medians)`);
  console.log(
    `off: ${off.toFixed(2)} jobs/s; on: ${on.toFixed(2)} jobs/s; cost ${((1 - on / off) * 100).toFixed(1)} %`,
  );
  console.log(`spans per job (on): ${(median(of('on').map((r) => r.spans)) / JOBS).toFixed(1)}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
