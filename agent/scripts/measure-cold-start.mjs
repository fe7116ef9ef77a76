#!/usr/bin/env node
/**
 * Cold start of the agent, measured as what a sandbox waits for: from spawn to the first
 * heartbeat key appearing in Redis. Compares
 *   - the single executable started directly,
 *   - the single executable started through its bundled loader (how sandboxes start it),
 *   - `node agent/dist/main.js` (plain Node, the tsc output).
 * Each run uses a fresh job id, is stopped with SIGTERM once alive, and its keys are removed.
 *
 * With --docker, also `docker run` of the injected agent in the libc-less busybox image (the
 * carrier injects into a fresh volume first; `npm run images` must have run).
 *
 * Usage: node agent/scripts/measure-cold-start.mjs [--runs 15] [--redis-url redis://127.0.0.1:6379] [--docker]
 * Needs `npm run build` first. Prints a Markdown table.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { Redis } from 'ioredis';

const execFileAsync = promisify(execFile);
const agentDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '15' },
    'redis-url': { type: 'string', default: 'redis://127.0.0.1:6379' },
    // Also time `docker run` of the injected agent in sandstream/busybox:static (needs the images).
    docker: { type: 'boolean', default: false },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1 || runs > 1000)
  throw new Error('--runs must be a whole number 1..1000');

const binary = join(agentDir, 'dist', 'sandstream-agent');
const lib = join(agentDir, 'dist', 'runtime', 'lib');
const variants = [
  { name: 'SEA, direct', argv: [binary] },
  {
    name: 'SEA, via bundled loader',
    argv: [join(lib, 'ld-linux-x86-64.so.2'), '--library-path', lib, binary],
  },
  { name: 'node dist/main.js', argv: [process.execPath, join(agentDir, 'dist', 'main.js')] },
];

const volume = `sandstream-coldstart-${randomBytes(4).toString('hex')}`;
if (values.docker) {
  await execFileAsync('docker', ['volume', 'create', volume]);
  await execFileAsync('docker', ['run', '--rm', '-v', `${volume}:/shared`, 'sandstream/agent-carrier:dev']);
  variants.push({
    name: '`docker run` busybox:static, injected agent via loader',
    argv: [
      'docker',
      'run',
      '--rm',
      '--network',
      'host',
      '-v',
      `${volume}:/shared:ro`,
      'sandstream/busybox:static',
      '/shared/lib/ld-linux-x86-64.so.2',
      '--library-path',
      '/shared/lib',
      '/shared/sandstream-agent',
    ],
  });
}

const redis = new Redis(values['redis-url']);
const POLL_MS = 2;

async function once(argv) {
  const jobId = `coldstart-${randomBytes(6).toString('hex')}`;
  const heartbeat = `sandbox:${jobId}:heartbeat`;
  const started = process.hrtime.bigint();
  const child = spawn(argv[0], [...argv.slice(1), '--redis-url', values['redis-url'], '--job-id', jobId], {
    stdio: 'ignore',
    cwd: '/tmp',
  });
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  try {
    for (;;) {
      if (exited) throw new Error(`${argv.join(' ')} exited before its first heartbeat`);
      if ((await redis.exists(heartbeat)) === 1) return Number(process.hrtime.bigint() - started) / 1e6;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    if (!exited) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    await redis.unlink(
      heartbeat,
      `sandbox:${jobId}:in`,
      `sandbox:${jobId}:events`,
      `sandbox:${jobId}:results`,
    );
  }
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

// Round-robin over the variants, so that the machine's load (shared, noisy) hits all of them alike.
for (const v of variants) await once(v.argv); // warm the page cache: we measure process start, not the disk
const times = variants.map(() => []);
for (let i = 0; i < runs; i++) {
  for (const [k, v] of variants.entries()) times[k].push(await once(v.argv));
}
const rows = variants.map((v, k) => {
  const t = times[k].sort((a, b) => a - b);
  return `| ${v.name} | ${pct(t, 50).toFixed(0)} | ${pct(t, 90).toFixed(0)} | ${t[0].toFixed(0)} |`;
});
await redis.quit();
if (values.docker) await execFileAsync('docker', ['volume', 'rm', volume]);

const mib = (p) => (statSync(p).size / 1024 / 1024).toFixed(1);
const libBytes = [
  'ld-linux-x86-64.so.2',
  'libc.so.6',
  'libstdc++.so.6',
  'libm.so.6',
  'libgcc_s.so.1',
  'libdl.so.2',
  'libpthread.so.0',
]
  .map((f) => statSync(join(lib, f)).size)
  .reduce((a, b) => a + b, 0);
console.log(`binary ${mib(binary)} MiB, runtime/lib ${(libBytes / 1024 / 1024).toFixed(1)} MiB`);
console.log(
  `runs per variant: ${runs}; load average at end: ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
console.log('');
console.log('| start | median ms | p90 ms | min ms |');
console.log('|---|---|---|---|');
for (const r of rows) console.log(r);
