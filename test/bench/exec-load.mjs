// The client side of test/bench/exec-cpu.bench.ts, as its own process so its CPU is read like
// every other process's, and so each build is driven by its own SDK: `count` live sandboxes,
// each running `exec(['true'])` back to back. Protocol on stdin/stdout, one word a line:
// it prints `ready` once its sandboxes are warm, runs for `seconds` on `go`, then prints one
// JSON line (commands, latencies' p50 and p99) and closes its sandboxes on `close`.
//
//   node test/bench/exec-load.mjs <repo root> <redis url> <namespace> <id prefix> <count> <seconds>
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const [root, url, namespace, prefix, countArg, secondsArg] = process.argv.slice(2);
const count = Number(countArg);
const seconds = Number(secondsArg);
const { SandstreamClient } = await import(pathToFileURL(`${root}/libs/client/dist/index.js`).href);
// The SDK's own ioredis, so the client is exactly what that build ships.
const { Redis } = await import(pathToFileURL(`${root}/node_modules/ioredis/built/index.js`).href);

const redis = new Redis(url);
const client = new SandstreamClient({ redis, namespace });
const words = createInterface({ input: process.stdin });
const next = (word) =>
  new Promise((resolve) => {
    const onLine = (line) => {
      if (line.trim() !== word) return;
      words.off('line', onLine);
      resolve();
    };
    words.on('line', onLine);
  });

const sandboxes = await Promise.all(
  Array.from({ length: count }, (_, i) =>
    client.sandboxes.create({
      id: `${prefix}-${i}`,
      image: 'none',
    }),
  ),
);
// Warm-up: JIT on every side, connection pools filled.
await Promise.all(
  sandboxes.map(async (s) => {
    for (let i = 0; i < 30; i++) await s.exec(['true']);
  }),
);
process.stdout.write('ready\n');
await next('go');

const latencies = [];
const end = performance.now() + seconds * 1000;
await Promise.all(
  sandboxes.map(async (sandbox) => {
    while (performance.now() < end) {
      const t = performance.now();
      await sandbox.exec(['true']);
      latencies.push(performance.now() - t);
    }
  }),
);
latencies.sort((a, b) => a - b);
const at = (p) =>
  latencies[Math.min(latencies.length - 1, Math.max(0, Math.ceil((p / 100) * latencies.length) - 1))];
process.stdout.write(`${JSON.stringify({ commands: latencies.length, p50: at(50), p99: at(99) })}\n`);
await next('close');
await Promise.all(sandboxes.map((s) => s.close()));
await client.close();
redis.disconnect();
process.exit(0);
