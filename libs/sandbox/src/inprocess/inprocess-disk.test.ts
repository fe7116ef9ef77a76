import { randomBytes } from 'node:crypto';
import { readdir, rm, statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyTestSandbox, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxDiskUsage } from '../backend.js';
import { DiskBudgetWatch, isDiskBudgetReason } from '../disk-budget-watch.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { InProcessBackend } from './inprocess-backend.js';

// Issue 28, item 1, in-process: the job's directory is watched against its disk limit; a filler
// past it (here in its own session, as a step's process would be) is killed with the whole tree
// below the sandbox's process, and the bytes leave with destroy.
const redisUrl = testRedisUrl();
const root = join(tmpdir(), `sandstream-inprocess-disk-${randomBytes(4).toString('hex')}`);
const registryKey = `sandstream:test:inprocess-disk:${randomBytes(4).toString('hex')}`;
const MiB = 1024 ** 2;
const INTERVAL_MS = 1000;
/** One measuring walk and the kill beyond rate × interval, and a 4 MiB chunk in flight. */
const SLACK = 24 * MiB;
const FREE_SLACK = 32 * MiB;

describe('InProcessBackend: disk budget', () => {
  let redis: Redis;
  let backend: InProcessBackend;
  beforeAll(() => {
    redis = new Redis(redisUrl);
    backend = new InProcessBackend({ redis, root, registryKey });
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
    await redis.unlink(registryKey);
    redis.disconnect();
  });

  it('stops a sandbox filling its directory with reason disk-budget, within rate × interval, killing processes in other sessions too', async () => {
    const baseline = await freeBytes();
    const jobId = `disk-inproc-${randomBytes(3).toString('hex')}`;
    const filler =
      'i=0; while true; do dd if=/dev/zero of=fill-$i bs=1M count=4 2>/dev/null; i=$((i+1)); sleep 0.1; done';
    const ref = await backend.create({
      jobId,
      tenant: 'tenant-a',
      // Instead of the agent: the filler, detached into a session of its own under a waiting shell.
      spec: SandboxSpecSchema.parse({
        image: 'ignored',
        command: ['sh', '-c', `setsid sh -c '${filler}' & wait`],
        resources: { limits: { ephemeralStorage: '64Mi' } },
      }),
      agent: { redisUrl, keyStyle: 'tagged' },
    });
    const samples: { at: number; bytes: number }[] = [];
    let watch: DiskBudgetWatch | undefined;
    const stopped = new Promise<{ usage: SandboxDiskUsage; reason: string }>((resolve, reject) => {
      watch = new DiskBudgetWatch({
        backend,
        intervalMs: INTERVAL_MS,
        onMeasured: (r, usage) => {
          if (r.jobId === jobId) samples.push({ at: Date.now(), bytes: usage.usedBytes });
        },
        onOverBudget: async (r, usage, reason) => {
          if (r.jobId === jobId) resolve({ usage, reason });
        },
        onError: reject,
      });
    });
    watch?.start();
    const { usage, reason } = await stopped;
    await watch?.stop();
    expect(isDiskBudgetReason(reason)).toBe(true);
    expect(usage.limitBytes).toBe(64 * MiB);
    // The filler in its own session is gone: nothing under the job's directory grows any more.
    const stray = await processesIn(join(root, 'jobs'));
    expect(stray).toEqual([]);
    const final = (await backend.diskUsage(ref)) as SandboxDiskUsage;
    let rate = 0;
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1]!;
      const b = samples[i]!;
      rate = Math.max(rate, ((b.bytes - a.bytes) / Math.max(1, b.at - a.at)) * 1000);
    }
    const overshoot = final.usedBytes - usage.limitBytes;
    console.log(
      `in-process: rate ${(rate / MiB).toFixed(1)} MiB/s, overshoot ${(overshoot / MiB).toFixed(1)} MiB`,
    );
    expect(overshoot).toBeLessThanOrEqual((rate * INTERVAL_MS) / 1000 + SLACK);

    const beforeDestroy = await freeBytes();
    await destroyTestSandbox(redis, backend, ref, 0);
    expect(await backend.diskUsage(ref)).toBeUndefined();
    const after = await freeBytes();
    console.log(`in-process: free space vs baseline ${((after - baseline) / MiB).toFixed(1)} MiB`);
    // Measured across the destroy alone: others write to this disk too, so the baseline drifts.
    expect(after - beforeDestroy).toBeGreaterThanOrEqual(final.usedBytes - FREE_SLACK);
  }, 60_000);
});

async function freeBytes(): Promise<number> {
  const s = await statfs(tmpdir());
  return s.bavail * s.bsize;
}

/** Pids whose working directory is under `dir`. */
async function processesIn(dir: string): Promise<number[]> {
  const { readlink } = await import('node:fs/promises');
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cwd = await readlink(`/proc/${name}/cwd`).catch(() => '');
    if (cwd.startsWith(dir)) found.push(Number(name));
  }
  return found;
}
