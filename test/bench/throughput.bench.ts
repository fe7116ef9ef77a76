/**
 * End-to-end throughput and latency of one-step jobs (all four services as processes, the
 * in-process backend: one real agent process per job), against raw BullMQ add -> process of
 * empty jobs on the same private redis-server in the same run.
 *
 *   npx tsc -b && npx vite-node test/bench/throughput.bench.ts [jobs]
 */
import { SandstreamClient } from '@sandstream/client';
import { percentile, startRedisServer, startServices, uniqueNamespace } from '@sandstream/test-support';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { runOneStepJobs } from '../helpers/one-step-jobs.js';

const JOBS = Number(process.argv[2] ?? 200);
const SEQUENTIAL = 10;

const fmt = (n: number) => n.toFixed(1);

async function rawBullmq(url: string, n: number): Promise<{ perSecond: number; p50: number; p99: number }> {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const prefix = `{${uniqueNamespace('raw')}}`;
  const queue = new Queue('raw', { connection, prefix });
  const events = new QueueEvents('raw', { connection: connection.duplicate(), prefix });
  await events.waitUntilReady();
  const latencies: number[] = [];
  let done = 0;
  const finished = new Promise<void>((resolve) => {
    events.on('completed', () => {
      if (++done === n) resolve();
    });
  });
  const worker = new Worker('raw', async () => undefined, {
    connection: connection.duplicate(),
    prefix,
    concurrency: 16,
  });
  worker.on('completed', (job) => latencies.push((job.finishedOn ?? 0) - job.timestamp));
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await queue.add('empty', {});
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  await worker.close();
  await events.close();
  await queue.close();
  connection.disconnect();
  latencies.sort((a, b) => a - b);
  return { perSecond: n / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

async function main(): Promise<void> {
  const own = await startRedisServer({ args: ['--maxclients', '10000'] });
  const namespace = uniqueNamespace('tput');
  const env = {
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    SCHEDULER_GLOBAL_SLOTS: '16',
    SCHEDULER_TENANT_SLOTS: '16',
    LOG_LEVEL: 'warn',
  };
  const services = await startServices(env);
  const redis = new Redis(own.url);
  const client = new SandstreamClient({ redis, namespace });

  // Idle system, one job at a time: the latency a user sees.
  const sequential: number[] = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t = performance.now();
    const { jobId } = await client.submit({
      id: `${namespace}-s${i}`,
      image: 'none',
      steps: [{ command: 'true' }],
    });
    await client.wait(jobId, { timeoutMs: 30_000 });
    sequential.push(performance.now() - t);
  }
  sequential.sort((a, b) => a - b);

  // Throughput: JOBS submitted at once.
  const { seconds, latencies, failed } = await runOneStepJobs(client, `${namespace}-b`, JOBS);
  latencies.sort((a, b) => a - b);
  const ours = JOBS / seconds;

  await client.close();
  redis.disconnect();
  for (const s of services) await s.stop();

  const raw = await rawBullmq(own.url, JOBS * 5);
  await own.stop();

  console.log('\n## end-to-end one-step jobs (in-process backend, 16 slots, 4 services, 1 process each)');
  console.log(
    `sequential submit -> complete (idle): p50 ${fmt(percentile(sequential, 50))} ms, max ${fmt(sequential.at(-1) ?? 0)} ms (n=${SEQUENTIAL})`,
  );
  console.log(
    `${JOBS} jobs at once: ${fmt(ours)} jobs/s, submit -> complete p50 ${fmt(percentile(latencies, 50))} ms, p99 ${fmt(percentile(latencies, 99))} ms, failed ${failed}`,
  );
  console.log(
    `raw BullMQ empty jobs (${JOBS * 5}, concurrency 16): ${fmt(raw.perSecond)} jobs/s, add -> complete p50 ${fmt(raw.p50)} ms, p99 ${fmt(raw.p99)} ms`,
  );
  console.log(
    `ratio: sandstream / raw BullMQ throughput = ${(ours / raw.perSecond).toFixed(4)} (1 : ${fmt(raw.perSecond / ours)})`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
