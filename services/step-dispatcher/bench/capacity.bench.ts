/**
 * Dispatcher capacity: one step-dispatcher process drives JOBS jobs at once. A load generator in
 * this process plays every agent over the wire protocol (it pops Steps from `sandbox:{id}:in`,
 * "runs" each for a random 2–6 s, LPUSHes a StepResult and XADDs a CompletionNotice, and keeps
 * every heartbeat alive), so no real processes are needed for 10,000 sandboxes.
 *
 * Runs against a private redis-server (keyspace notifications on, so the generator learns of
 * pushed steps without polling 10,000 lists). Prints step latency (notice -> next step pushed),
 * Redis connections held by the dispatcher, its memory, and Redis memory; the baseline is a
 * plain PING round trip measured in the same run.
 *
 *   npx tsc -b services/step-dispatcher && npx vite-node services/step-dispatcher/bench/capacity.bench.ts [jobs]
 */
import { readFileSync } from 'node:fs';
import { bullJobId, createKeySpace, DispatchKeys, JobStore, parseJobSpec, QueueNames } from '@sandstream/bus';
import { percentile, startRedisServer, startService, uniqueNamespace } from '@sandstream/test-support';
import { encodeCompletionNotice, resultKey, SCHEMA_VERSION, type StepResult } from '@sandstream/wire';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';

const JOBS = Number(process.argv[2] ?? 10_000);
const STEPS = 4;
const SHARDS = 8;

const fmt = (n: number) => n.toFixed(1);

async function main(): Promise<void> {
  const own = await startRedisServer({ args: ['--notify-keyspace-events', 'Kl', '--maxclients', '20000'] });
  const redis = new Redis(own.url);
  const sub = new Redis(own.url);
  const namespace = uniqueNamespace('cap');
  const keySpace = createKeySpace(namespace);
  const dispatchKeys = new DispatchKeys(keySpace, SHARDS);
  const store = new JobStore({ redis, keys: keySpace });
  const ids = Array.from({ length: JOBS }, (_, i) => `${namespace}-j${i}`);
  const spec = (id: string) =>
    parseJobSpec({ id, image: 'none', steps: Array.from({ length: STEPS }, () => ({ command: 'true' })) });

  console.log(`preparing ${JOBS} job records (running, heart-beating) …`);
  for (let i = 0; i < JOBS; i += 500) {
    await Promise.all(
      ids.slice(i, i + 500).map(async (id) => {
        await store.create(spec(id));
        await store.transition(id, ['queued'], 'scheduled');
        await store.transition(id, ['scheduled'], 'starting');
        await store.transition(id, ['starting'], 'running');
      }),
    );
  }
  const beat = () => Promise.all(ids.map((id) => redis.set(keySpace.sandbox(id).heartbeat, '1', 'PX', 6000)));
  await beat();
  const beatTimer = setInterval(() => void beat(), 2000);

  const dispatcher = await startService(
    'step-dispatcher',
    {
      REDIS_URL: own.url,
      SANDSTREAM_NAMESPACE: namespace,
      COMPLETION_SHARDS: String(SHARDS),
      DISPATCH_CONCURRENCY: '200',
      // info: the dispatcher logs its own completion handling latency every 10 s.
      LOG_LEVEL: 'info',
    },
    {
      // CAPACITY_PROFILE_DIR=/tmp/x writes a CPU profile of the dispatcher there.
      nodeArgs: process.env.CAPACITY_PROFILE_DIR
        ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CAPACITY_PROFILE_DIR}`]
        : [],
    },
  );
  const pid = dispatcher.child.pid as number;

  // The generator's side of the wire protocol.
  const latencies: number[] = [];
  const waitingSince = new Map<string, number>();
  let inFlight = 0;
  let peakInFlight = 0;
  let stepsRun = 0;
  const started = new Set<string>();
  const complete = async (jobId: string, stepId: string) => {
    const keys = keySpace.sandbox(jobId);
    const result: StepResult = {
      schemaVersion: SCHEMA_VERSION,
      stepId,
      exitCode: 0,
      timedOut: false,
      durationSeconds: 1,
      errorMessage: null,
    };
    await redis.set(resultKey(keys, stepId), JSON.stringify(result));
    waitingSince.set(jobId, performance.now());
    await redis.xadd(
      dispatchKeys.completionStreamFor(jobId),
      '*',
      ...encodeCompletionNotice({ jobId, stepId }),
    );
    stepsRun++;
  };
  sub.on('pmessage', (_pattern, channel, event) => {
    if (event !== 'lpush') return;
    const key = channel.slice(channel.indexOf(':') + 1);
    const jobId = /^sandbox:\{(.+)\}:in$/.exec(key)?.[1];
    if (!jobId) return;
    void redis.rpop(key).then((raw) => {
      if (!raw) return;
      const step = JSON.parse(raw) as { stepId: string };
      const since = waitingSince.get(jobId);
      if (since !== undefined) latencies.push(performance.now() - since);
      if (!started.has(jobId)) {
        started.add(jobId);
        inFlight++;
        peakInFlight = Math.max(peakInFlight, inFlight);
      }
      setTimeout(() => void complete(jobId, step.stepId), 2000 + Math.random() * 4000);
    });
  });
  await sub.psubscribe('__keyspace@0__:sandbox:{*}:in');

  // Samples while the load runs.
  let peakRssMb = 0;
  let peakRedisMb = 0;
  let dispatcherConnections = 0;
  let totalConnections = 0;
  const pings: number[] = [];
  const sample = async () => {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    peakRssMb = Math.max(peakRssMb, Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
    const memory = await redis.info('memory');
    peakRedisMb = Math.max(peakRedisMb, Number(/used_memory:(\d+)/.exec(memory)?.[1] ?? 0) / 1024 / 1024);
    const clients = (await redis.client('LIST')) as string;
    const lines = clients.trim().split('\n');
    totalConnections = Math.max(totalConnections, lines.length);
    dispatcherConnections = Math.max(
      dispatcherConnections,
      lines.filter((l) => /name=step-dispatcher/.test(l)).length,
    );
    const t = performance.now();
    await redis.ping();
    pings.push(performance.now() - t);
  };
  const sampler = setInterval(() => void sample(), 1000);

  const queue = new Queue(QueueNames.dispatch, { connection: redis, prefix: keySpace.bullPrefix });
  const t0 = performance.now();
  for (let i = 0; i < JOBS; i += 1000) {
    await queue.addBulk(
      ids.slice(i, i + 1000).map((jobId) => ({
        name: 'dispatch',
        data: {
          jobId,
          sandbox: { jobId, backend: 'inprocess' as const, id: 'generated' },
          notifyStream: dispatchKeys.completionStreamFor(jobId),
        },
        opts: { jobId: bullJobId(jobId), removeOnComplete: true },
      })),
    );
  }
  let allStartedAt = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    if (!allStartedAt && started.size === JOBS) allStartedAt = performance.now();
    const done = await redis.zcard(keySpace.jobsByState('succeeded'));
    if (done === JOBS) break;
    if (performance.now() - t0 > 600_000)
      throw new Error(`only ${done} of ${JOBS} jobs finished in 10 minutes`);
  }
  const elapsed = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  clearInterval(beatTimer);
  await sample();
  const failed = await redis.zcard(keySpace.jobsByState('failed'));

  latencies.sort((a, b) => a - b);
  pings.sort((a, b) => a - b);
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  const ping50 = percentile(pings, 50);
  console.log('\n## dispatcher capacity (one instance, simulated agents)');
  console.log(`jobs ${JOBS} × ${STEPS} steps, step run time 2–6 s (simulated)`);
  console.log(`peak jobs in flight          ${peakInFlight}`);
  console.log(`all ${JOBS} first steps pushed in ${fmt((allStartedAt - t0) / 1000)} s`);
  console.log(
    `all jobs succeeded in        ${fmt(elapsed)} s (failed: ${failed}); steps completed ${stepsRun}`,
  );
  console.log(
    `step latency (notice -> next step pushed): p50 ${fmt(p50)} ms, p99 ${fmt(p99)} ms, max ${fmt(latencies.at(-1) ?? 0)} ms (n=${latencies.length})`,
  );
  console.log(
    `baseline PING round trip p50 ${fmt(ping50)} ms -> latency p50 is ${fmt(p50 / ping50)}× a PING`,
  );
  console.log(`dispatcher Redis connections ${dispatcherConnections} (all clients ${totalConnections})`);
  console.log(`dispatcher RSS peak          ${fmt(peakRssMb)} MB`);
  console.log(`Redis used_memory peak       ${fmt(peakRedisMb)} MB`);

  // The dispatcher's own view (notice accepted by Redis -> handled), free of this generator's lag.
  await new Promise((r) => setTimeout(r, 10_500));
  const windows = dispatcher
    .output()
    .split('\n')
    .filter((l) => l.includes('completion handling latency'))
    .map((l) => JSON.parse(l) as { count: number; p50: number; p99: number; max: number });
  console.log('dispatcher-side completion latency per 10 s window (notices: p50 / p99 / max ms):');
  for (const w of windows) console.log(`  ${w.count}: ${w.p50} / ${w.p99} / ${w.max}`);
  const warnings = dispatcher
    .output()
    .split('\n')
    .filter((l) => /"level":"(warn|error|fatal)"/.test(l));
  console.log(`dispatcher warnings/errors logged: ${warnings.length}`);
  for (const line of warnings.slice(0, 3)) console.log(`  ${line.slice(0, 300)}`);
  await dispatcher.stop();
  await queue.close();
  sub.disconnect();
  redis.disconnect();
  await own.stop();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
