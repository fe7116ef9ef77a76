/**
 * Live sandboxes through the services (all four as processes, in-process backend, a private
 * redis-server), each figure against a baseline measured in the same run:
 *
 * 1. `exec(['true'])` round trip through the SDK and services, against the agent alone: a step
 *    LPUSHed by hand to an agent started directly, its result BRPOPped (same Redis, same agent
 *    build, the same parallel code path). Goal: p50 <= 1.5x.
 * 2. N live sandboxes at once on one dispatcher instance, each running one command a second,
 *    against one sandbox alone doing the same: p50/p99 latency, and Redis connections used.
 *
 * 3. A shell session's round trip against a bare bash over a pipe with a marker (goal +2 ms at p50).
 *
 * Upload and download rates are test/bench/transfer.bench.ts (both backends).
 *
 *   npm run build && npx vite-node test/bench/live-sandbox.bench.ts [rounds] [sandboxes] [seconds]
 */
import { spawn } from 'node:child_process';
import { SandstreamClient } from '@sandstream/client';
import {
  repoRoot,
  startRedisServer,
  startServices,
  summarize,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';

const ROUNDS = Number(process.argv[2] ?? 300);
const SANDBOXES = Number(process.argv[3] ?? 100);
const SECONDS = Number(process.argv[4] ?? 20);

const ms = (n: number) => `${n.toFixed(2)} ms`;

/** The agent alone: started by hand, fed by LPUSH, answered on its results list. */
async function agentAlone(url: string, rounds: number): Promise<number[]> {
  const jobId = uniqueNamespace('alone');
  const agent = spawn(
    process.execPath,
    [`${repoRoot}agent/dist/main.js`, '--redis-url', url, '--job-id', jobId, '--idle-timeout-seconds', '5'],
    { stdio: 'ignore' },
  );
  const redis = new Redis(url);
  const keys = {
    in: `sandbox:${jobId}:in`,
    results: `sandbox:${jobId}:results`,
    hb: `sandbox:${jobId}:heartbeat`,
  };
  while ((await redis.exists(keys.hb)) === 0) await new Promise((r) => setTimeout(r, 20));
  const latencies: number[] = [];
  for (let i = 0; i < rounds + 20; i++) {
    const t = performance.now();
    await redis.lpush(
      keys.in,
      JSON.stringify({ schemaVersion: 1, stepId: `s${i}`, command: 'true', parallel: true }),
    );
    await redis.brpop(keys.results, 10);
    // The first rounds warm both sides up (JIT, connection buffers); not counted, as below.
    if (i >= 20) latencies.push(performance.now() - t);
  }
  await redis.lpush(keys.in, JSON.stringify({ schemaVersion: 1, stepId: 'bye', kind: 'shutdown' }));
  await new Promise((r) => agent.once('exit', r));
  await redis.del(keys.in, keys.results, `sandbox:${jobId}:events`);
  redis.disconnect();
  return latencies;
}

async function execRoundTrips(client: SandstreamClient, id: string, rounds: number): Promise<number[]> {
  const sandbox = await client.sandboxes.create({ id, image: 'none' });
  const latencies: number[] = [];
  for (let i = 0; i < rounds + 20; i++) {
    const t = performance.now();
    await sandbox.exec(['true']);
    if (i >= 20) latencies.push(performance.now() - t);
  }
  await sandbox.close();
  return latencies;
}

/** `count` sandboxes, each running `true` once a second for `seconds`; every exec's latency. */
async function oncePerSecond(client: SandstreamClient, prefix: string, count: number, seconds: number) {
  const sandboxes = await Promise.all(
    Array.from({ length: count }, (_, i) => client.sandboxes.create({ id: `${prefix}-${i}`, image: 'none' })),
  );
  const latencies: number[] = [];
  await Promise.all(
    sandboxes.map(async (sandbox, i) => {
      // Spread the sandboxes over the second, as independent agents would be.
      await new Promise((r) => setTimeout(r, (1000 * i) / count));
      const end = Date.now() + seconds * 1000;
      while (Date.now() < end) {
        const t = performance.now();
        await sandbox.exec(['true']);
        const took = performance.now() - t;
        latencies.push(took);
        await new Promise((r) => setTimeout(r, Math.max(0, 1000 - took)));
      }
    }),
  );
  await Promise.all(sandboxes.map((s) => s.close()));
  return latencies;
}

/**
 * Abort mid-command: `sleep 60` started, then aborted; the time from abort() until the exec
 * settles with its cancelled result (the tree killed, the result back), against a plain `true`.
 */
async function abortLatency(client: SandstreamClient, id: string, rounds: number): Promise<number[]> {
  const sandbox = await client.sandboxes.create({ id, image: 'none' });
  const latencies: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const controller = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const exec = sandbox.exec('echo up; sleep 60', { signal: controller.signal, onStdout: () => started() });
    await running;
    const t = performance.now();
    controller.abort();
    await exec.then(
      () => undefined,
      () => undefined,
    );
    latencies.push(performance.now() - t);
  }
  await sandbox.close();
  return latencies;
}

/** A bare bash over a pipe: write the command and a marker, read up to the marker (seeds/004's way). */
async function bareShellRoundTrips(rounds: number): Promise<number[]> {
  const bash = spawn('bash', ['--noprofile', '--norc'], { stdio: ['pipe', 'pipe', 'ignore'] });
  let buffered = '';
  let waiter: (() => void) | undefined;
  bash.stdout.setEncoding('utf8');
  bash.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    waiter?.();
  });
  const latencies: number[] = [];
  for (let i = 0; i < rounds + 20; i++) {
    const mark = `__MARK_${i}__`;
    const t = performance.now();
    bash.stdin.write(`{ true\n} </dev/null\nprintf '%s%d\\n' '${mark}' "$?"\n`);
    while (!buffered.includes(mark)) await new Promise<void>((resolve) => (waiter = resolve));
    buffered = '';
    if (i >= 20) latencies.push(performance.now() - t);
  }
  bash.kill();
  return latencies;
}

async function shellRoundTrips(client: SandstreamClient, id: string, rounds: number): Promise<number[]> {
  const sandbox = await client.sandboxes.create({ id, image: 'none' });
  const shell = sandbox.shell();
  const latencies: number[] = [];
  for (let i = 0; i < rounds + 20; i++) {
    const t = performance.now();
    await shell.run('true');
    if (i >= 20) latencies.push(performance.now() - t);
  }
  await sandbox.close();
  return latencies;
}

async function connectedClients(redis: Redis): Promise<number> {
  const info = await redis.info('clients');
  return Number(/connected_clients:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

async function main(): Promise<void> {
  const own = await startRedisServer({ args: ['--maxclients', '10000'] });
  const namespace = uniqueNamespace('lbench');
  const env = {
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    SCHEDULER_GLOBAL_SLOTS: String(SANDBOXES + 8),
    SCHEDULER_TENANT_SLOTS: String(SANDBOXES + 8),
    LOG_LEVEL: 'warn',
  };
  const services = await startServices(env);
  const redis = new Redis(own.url);
  const client = new SandstreamClient({ redis, namespace });
  try {
    // Interleaved, so drift in the machine's load hits both sides alike.
    const alone: number[] = [];
    const live: number[] = [];
    for (let round = 0; round < 3; round++) {
      alone.push(...(await agentAlone(own.url, Math.ceil(ROUNDS / 3))));
      live.push(...(await execRoundTrips(client, `${namespace}-rt${round}`, Math.ceil(ROUNDS / 3))));
    }
    const a = summarize(alone);
    const l = summarize(live);
    console.log(`exec('true') round trip, ${l.n} rounds each`);
    console.log(`  agent alone (LPUSH step, BRPOP result): p50 ${ms(a.p50)}  p99 ${ms(a.p99)}`);
    console.log(`  live sandbox exec through the services: p50 ${ms(l.p50)}  p99 ${ms(l.p99)}`);
    console.log(
      `  ratio p50 ${(l.p50 / a.p50).toFixed(2)}x (goal <= 1.5x), p99 ${(l.p99 / a.p99).toFixed(2)}x`,
    );

    const aborts = summarize(await abortLatency(client, `${namespace}-abort`, 30));
    console.log(
      `abort mid-command (sleep 60), ${aborts.n} rounds: p50 ${ms(aborts.p50)}  p99 ${ms(aborts.p99)}`,
    );

    const bare = summarize(await bareShellRoundTrips(ROUNDS));
    const shell = summarize(await shellRoundTrips(client, `${namespace}-shell`, ROUNDS));
    console.log(`shell session round trip of 'true', ${shell.n} rounds`);
    console.log(`  bare bash over a pipe with a marker: p50 ${ms(bare.p50)}  p99 ${ms(bare.p99)}`);
    console.log(`  sandbox.shell().run:                 p50 ${ms(shell.p50)}  p99 ${ms(shell.p99)}`);
    console.log(`  difference at p50 ${ms(shell.p50 - bare.p50)} (goal <= +2 ms)`);

    const before = await connectedClients(redis);
    const single = summarize(await oncePerSecond(client, `${namespace}-one`, 1, SECONDS));
    const many = await (async () => {
      let peak = 0;
      const sampling = setInterval(() => {
        connectedClients(redis).then((n) => {
          peak = Math.max(peak, n);
        });
      }, 500);
      try {
        return { ...summarize(await oncePerSecond(client, `${namespace}-many`, SANDBOXES, SECONDS)), peak };
      } finally {
        clearInterval(sampling);
      }
    })();
    console.log(`one command a second per sandbox, ${SECONDS} s, one dispatcher instance`);
    console.log(`  1 sandbox alone:   p50 ${ms(single.p50)}  p99 ${ms(single.p99)}  (${single.n} commands)`);
    console.log(
      `  ${SANDBOXES} sandboxes:     p50 ${ms(many.p50)}  p99 ${ms(many.p99)}  (${many.n} commands)`,
    );
    console.log(
      `  ratio p50 ${(many.p50 / single.p50).toFixed(2)}x, p99 ${(many.p99 / single.p99).toFixed(2)}x`,
    );
    console.log(
      `  Redis connections: ${before} before, peak ${many.peak} with ${SANDBOXES} sandboxes ` +
        `(agents: 3 each; services: fixed; this client: 1 + one blocking reader per command in flight)`,
    );
  } finally {
    await client.close();
    redis.disconnect();
    await Promise.all(services.map((s) => s.stop(15_000)));
    await own.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
