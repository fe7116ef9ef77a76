/**
 * A terminal's keystroke round trip (what a person typing feels): one byte written through the
 * SDK until its echo comes back on the terminal's output, the in-process backend with the four
 * services and a private redis-server; against the same pty with no Redis between, the agent's
 * own spawner launcher writing the byte and reading the echo (same run, same machine).
 *
 *   npm run build && npx vite-node test/bench/terminal.bench.ts [rounds]
 */
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
const ms = (n: number) => `${n.toFixed(2)} ms`;

interface Pty {
  type(byte: string): Promise<void>;
}

/** Round trips of one printable byte each; the first 20 warm up and are not counted. */
async function roundTrips(pty: Pty, rounds: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < rounds + 20; i++) {
    const t = performance.now();
    await pty.type(String.fromCharCode(97 + (i % 26)));
    if (i >= 20) latencies.push(performance.now() - t);
  }
  return latencies;
}

/** Resolves `type` once the byte was seen on the output (the line discipline's echo). */
function echoWaiter(): { seen: (text: string) => void; expect: (byte: string) => Promise<void> } {
  let waiting: { byte: string; resolve: () => void } | undefined;
  return {
    seen: (text) => {
      if (waiting && text.includes(waiting.byte)) {
        const { resolve } = waiting;
        waiting = undefined;
        resolve();
      }
    },
    expect: (byte) =>
      new Promise<void>((resolve) => {
        waiting = { byte, resolve };
      }),
  };
}

async function direct(rounds: number): Promise<number[]> {
  const { SpawnerLauncher } = await import(`${repoRoot}agent/dist/process/spawner-launcher.js`);
  const { createLogger } = await import(`${repoRoot}agent/dist/logger.js`);
  const launcher = new SpawnerLauncher(
    `${repoRoot}agent/dist/runtime/lib/sandstream-spawner`,
    createLogger({ verbose: false, write: () => {} }),
  );
  // `cat` on a terminal in canonical mode: the line discipline echoes each byte at once.
  const proc = launcher.launch({
    file: '/bin/cat',
    args: [],
    cwd: '/tmp',
    env: {},
    terminal: { cols: 80, rows: 24 },
  });
  const echo = echoWaiter();
  proc.on('stdout', (chunk: Buffer) => echo.seen(chunk.toString('latin1')));
  await new Promise((resolve) => proc.once('spawn', resolve));
  const latencies = await roundTrips(
    {
      type: (byte) => {
        const seen = echo.expect(byte);
        proc.writeInput(Buffer.from(byte));
        return seen;
      },
    },
    rounds,
  );
  launcher.close();
  return latencies;
}

async function throughSandstream(client: SandstreamClient, id: string, rounds: number): Promise<number[]> {
  const sandbox = await client.sandboxes.create({ id, image: 'none' });
  const terminal = await sandbox.terminals.open({ command: ['/bin/cat'] });
  const echo = echoWaiter();
  const reading = (async () => {
    for await (const chunk of terminal.output({ from: 'start' })) echo.seen(chunk.toString('latin1'));
  })();
  const latencies = await roundTrips(
    {
      type: async (byte) => {
        const seen = echo.expect(byte);
        await terminal.write(byte);
        await seen;
      },
    },
    rounds,
  );
  await terminal.kill();
  await reading;
  await sandbox.close();
  return latencies;
}

async function main(): Promise<void> {
  const own = await startRedisServer();
  const namespace = uniqueNamespace('tbench');
  const env = {
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
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
      alone.push(...(await direct(Math.ceil(ROUNDS / 3))));
      live.push(...(await throughSandstream(client, `${namespace}-t${round}`, Math.ceil(ROUNDS / 3))));
    }
    const a = summarize(alone);
    const l = summarize(live);
    console.log(`keystroke echo round trip, ${l.n} keystrokes each`);
    console.log(`  the pty alone (spawner, no Redis): p50 ${ms(a.p50)}  p99 ${ms(a.p99)}`);
    console.log(`  through Sandstream (SDK, Redis, agent): p50 ${ms(l.p50)}  p99 ${ms(l.p99)}`);
    console.log(`  difference: p50 +${ms(l.p50 - a.p50)}  p99 +${ms(l.p99 - a.p99)}`);
  } finally {
    await client.close();
    redis.disconnect();
    await Promise.all(services.map((s) => s.stop(15_000)));
    await own.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
