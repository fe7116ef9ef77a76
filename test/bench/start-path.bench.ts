/**
 * The start path's waste (issue 18 §2), all four services as processes on a private
 * redis-server, the in-process backend (one real agent process per job):
 * - pod-lifecycle's CPU per job (utime + stime from /proc/<pid>/stat), one job at a time;
 * - a burst of jobs through few slots: admission runs that found no slot (the scheduler's
 *   "no capacity; job waits" lines), how many of those were a job parked a second time or more,
 *   and the burst's duration;
 * - in that burst, the time from a job's end (its record's finishedAt) to the end of its destroy
 *   (pod-lifecycle's "sandbox destroyed" line): how long a slot was held after its job ended when
 *   it was released only after the destroy.
 * It uses nothing but the services' processes and their logs, so the same file measures an
 * older commit as well (copy it there, build, run).
 *
 *   npx tsc -b && npx vite-node test/bench/start-path.bench.ts [sequential] [burst] [slots]
 */
import { readFileSync } from 'node:fs';
import { SandstreamClient } from '@sandstream/client';
import {
  percentile,
  type RunningService,
  startRedisServer,
  startServices,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { runOneStepJobs } from '../helpers/one-step-jobs.js';

const SEQUENTIAL = Number(process.argv[2] ?? 30);
const BURST = Number(process.argv[3] ?? 100);
const SLOTS = Number(process.argv[4] ?? 4);
/** Kernel clock ticks per second (USER_HZ): 100 on Linux x86-64. */
const TICKS_PER_SECOND = 100;

/** utime + stime of a process, in ms. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

function serviceNamed(services: RunningService[], name: RunningService['name']): RunningService {
  const found = services.find((s) => s.name === name);
  if (!found?.child.pid) throw new Error(`${name} is not running`);
  return found;
}

/** The scheduler's "no capacity" log lines since `from` (an offset in its output), per job id. */
function parksSince(scheduler: RunningService, from: number): Map<string, number> {
  const parks = new Map<string, number>();
  for (const line of scheduler.output().slice(from).split('\n')) {
    if (!line.includes('no capacity; job waits')) continue;
    const jobId = /"jobId":"([^"]+)"/.exec(line)?.[1] ?? '?';
    parks.set(jobId, (parks.get(jobId) ?? 0) + 1);
  }
  return parks;
}

/** When pod-lifecycle logged each job's "sandbox destroyed", from `from` on (ms since the epoch). */
function destroyedAt(podLifecycle: RunningService, from: number): Map<string, number> {
  const at = new Map<string, number>();
  for (const line of podLifecycle.output().slice(from).split('\n')) {
    if (!line.includes('"sandbox destroyed"')) continue;
    const jobId = /"jobId":"([^"]+)"/.exec(line)?.[1];
    const time = /"time":"([^"]+)"/.exec(line)?.[1];
    if (jobId && time) at.set(jobId, Date.parse(time));
  }
  return at;
}

async function main(): Promise<void> {
  const own = await startRedisServer({ args: ['--maxclients', '10000'] });
  const namespace = uniqueNamespace('start');
  const services = await startServices({
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    SCHEDULER_GLOBAL_SLOTS: String(SLOTS),
    SCHEDULER_TENANT_SLOTS: String(SLOTS),
    // info: the scheduler's "no capacity" lines are what the burst counts.
    LOG_LEVEL: 'info',
  });
  const podLifecycle = serviceNamed(services, 'pod-lifecycle');
  const scheduler = serviceNamed(services, 'scheduler');
  const redis = new Redis(own.url);
  const client = new SandstreamClient({ redis, namespace });

  // One job at a time: pod-lifecycle's CPU for one start and one destroy, nothing overlapping.
  const warm = await client.submit({ id: `${namespace}-warm`, image: 'none', steps: [{ command: 'true' }] });
  await client.wait(warm.jobId, { timeoutMs: 30_000 });
  const cpuBefore = cpuMs(podLifecycle.child.pid as number);
  const latencies: number[] = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t = performance.now();
    const { jobId } = await client.submit({
      id: `${namespace}-s${i}`,
      image: 'none',
      steps: [{ command: 'true' }],
    });
    await client.wait(jobId, { timeoutMs: 30_000 });
    latencies.push(performance.now() - t);
  }
  const cpuPerJob = (cpuMs(podLifecycle.child.pid as number) - cpuBefore) / SEQUENTIAL;
  latencies.sort((a, b) => a - b);

  // A burst through few slots: how many admission runs found no slot.
  const logFrom = scheduler.output().length;
  const podLogFrom = podLifecycle.output().length;
  const schedulerCpuBefore = cpuMs(scheduler.child.pid as number);
  const burst = await runOneStepJobs(client, `${namespace}-b`, BURST);
  const parks = parksSince(scheduler, logFrom);
  const schedulerCpu = cpuMs(scheduler.child.pid as number) - schedulerCpuBefore;
  const totalParks = [...parks.values()].reduce((a, b) => a + b, 0);
  const reparks = [...parks.values()].reduce((a, b) => a + Math.max(b - 1, 0), 0);
  // Destroys finish shortly after the last job: give the last ones a moment to be logged.
  await new Promise((r) => setTimeout(r, 2000));
  const destroyed = destroyedAt(podLifecycle, podLogFrom);
  const destroyAfterEnd: number[] = [];
  for (let i = 0; i < BURST; i++) {
    const jobId = `${namespace}-b${i}`;
    const finishedAt = (await client.get(jobId))?.finishedAt;
    const end = destroyed.get(jobId);
    if (finishedAt !== undefined && end !== undefined) destroyAfterEnd.push(end - finishedAt);
  }
  destroyAfterEnd.sort((a, b) => a - b);

  await client.close();
  redis.disconnect();
  for (const s of services) await s.stop();
  await own.stop();

  console.log(`\n## start path (in-process backend, ${SLOTS} slots)`);
  console.log(
    `one job at a time (n=${SEQUENTIAL}): pod-lifecycle CPU ${cpuPerJob.toFixed(1)} ms/job; submit -> succeeded p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms`,
  );
  console.log(
    `burst of ${BURST}: job end -> its destroy done p50 ${percentile(destroyAfterEnd, 50).toFixed(0)} ms, p99 ${percentile(destroyAfterEnd, 99).toFixed(0)} ms (n=${destroyAfterEnd.length})`,
  );
  console.log(
    `burst of ${BURST}: admission runs that found no slot ${totalParks} (${parks.size} jobs parked, ${reparks} parked again after a wake-up); ${(BURST / burst.seconds).toFixed(2)} jobs/s, ${burst.seconds.toFixed(1)} s, failed ${burst.failed}; scheduler CPU ${(schedulerCpu / BURST).toFixed(1)} ms/job`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
