/**
 * Issue 16's figure through the whole stack: a step printing 1,000,000 numbered lines, the four
 * services on the in-process backend and a private redis-server, with the log archive on (a
 * private nats-server with JetStream, the reaper's archiver, agents started with --log-archive)
 * against off (no NATS: today's cap-and-count), alternated in one run. Reported per mode: the
 * step's duration (its result's durationSeconds), lines/s of the step, lines kept (in Redis or the
 * archive, not dropped), and the time until the archive holds the whole log.
 *
 *   npm run build && npx vite-node test/bench/log-archive.bench.ts [lines] [rounds]
 */
import { SandstreamClient } from '@sandstream/client';
import {
  NatsServer,
  pollUntil,
  startRedisServer,
  startServices,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';

const LINES = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = Number(process.argv[3] ?? 2);

interface Outcome {
  stepSeconds: number;
  kept: number;
  archivedAfterSeconds: number | null;
}

async function runOnce(redisUrl: string, nats: NatsServer | null, label: string): Promise<Outcome> {
  const namespace = uniqueNamespace(label);
  const env: Record<string, string> = {
    REDIS_URL: redisUrl,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    LOG_LEVEL: 'warn',
    ...(nats ? { NATS_URL: nats.url, LOG_ARCHIVE: 'on' } : {}),
  };
  const services = await startServices(env);
  const redis = new Redis(redisUrl);
  const client = new SandstreamClient({ redis, namespace });
  try {
    const { jobId } = await client.submit({
      id: `${namespace}-seq`,
      image: 'debian:bookworm-slim',
      steps: [{ command: 'seq', args: ['1', String(LINES)], timeoutSeconds: 600 }],
    });
    const started = Date.now();
    await pollUntil(
      'the job finished',
      async () => ['succeeded', 'failed'].includes((await client.get(jobId))?.state ?? ''),
      { timeoutMs: 600_000, intervalMs: 100 },
    );
    const result = Object.values((await client.get(jobId))?.stepResults ?? {})[0];
    let archivedAfterSeconds: number | null = null;
    if (nats) {
      await pollUntil(
        'the archive complete',
        async () => (await redis.get(client.keys.jobLogArchive(jobId))) === 'done',
        {
          timeoutMs: 600_000,
          intervalMs: 100,
        },
      );
      archivedAfterSeconds = (Date.now() - started) / 1000;
    }
    return {
      stepSeconds: result?.durationSeconds ?? Number.NaN,
      kept: (result?.outputLines ?? 0) - (result?.droppedLines ?? 0),
      archivedAfterSeconds,
    };
  } finally {
    await client.close();
    redis.disconnect();
    await Promise.all(services.map((s) => s.stop(15_000)));
  }
}

async function main(): Promise<void> {
  const own = await startRedisServer();
  const nats = await NatsServer.start({ jetstream: true });
  const rate = (o: Outcome) => LINES / o.stepSeconds;
  try {
    const off: Outcome[] = [];
    const on: Outcome[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      off.push(await runOnce(own.url, null, `aoff${round}`));
      on.push(await runOnce(own.url, nats, `aon${round}`));
    }
    console.log(`seq 1 ${LINES}, ${ROUNDS} rounds each, alternated`);
    for (const [name, runs] of [
      ['archive off', off],
      ['archive on', on],
    ] as const) {
      for (const o of runs) {
        console.log(
          `  ${name}: step ${o.stepSeconds.toFixed(1)} s = ${Math.round(rate(o)).toLocaleString('en-US')} lines/s; ` +
            `kept ${o.kept.toLocaleString('en-US')} (${Math.round((LINES / o.stepSeconds) * (o.kept / LINES)).toLocaleString('en-US')} kept lines/s)` +
            (o.archivedAfterSeconds === null
              ? ''
              : `; whole log archived ${o.archivedAfterSeconds.toFixed(1)} s after submit`),
        );
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const onRate = median(on.map(rate));
    const offRate = median(off.map(rate));
    const onKept = median(on.map((o) => rate(o) * (o.kept / LINES)));
    const offKept = median(off.map((o) => rate(o) * (o.kept / LINES)));
    console.log(`  step lines/s, on / off: ${(onRate / offRate).toFixed(2)}x (goal >= 0.5x)`);
    console.log(`  kept lines/s, on / off: ${(onKept / offKept).toFixed(2)}x`);
  } finally {
    await nats.stop();
    await own.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
