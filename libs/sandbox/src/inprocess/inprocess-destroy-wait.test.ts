import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { childExit } from './child-exit.js';
import { InProcessBackend } from './inprocess-backend.js';
import { isProcessAlive } from './process-control.js';

const tag = randomBytes(4).toString('hex');
const root = join(tmpdir(), `sandstream-inprocess-destroy-${tag}`);
const registryKey = `sandstream:test:inprocess-destroy:${tag}`;
let redis: Redis;

beforeAll(() => {
  redis = new Redis(testRedisUrl());
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  await redis.unlink(registryKey);
  redis.disconnect();
});

describe('childExit', () => {
  it('resolves true when the child exits, at once when it had, and false at its timeout', async () => {
    const quick = spawn('true');
    expect(await childExit(quick, 5000)).toBe(true);
    expect(await childExit(quick, 5000)).toBe(true);
    const slow = spawn('sleep', ['5']);
    expect(await childExit(slow, 50)).toBe(false);
    expect(slow.listenerCount('exit')).toBe(0);
    slow.kill('SIGKILL');
    expect(await childExit(slow, 5000)).toBe(true);
  });
});

describe('InProcessBackend.destroy()', () => {
  it('waits for its own child to exit without reading its liveness over and over', async () => {
    let checks = 0;
    const backend = new InProcessBackend({
      redis,
      root,
      registryKey,
      liveness: (pid, startTime) => {
        checks++;
        return isProcessAlive(pid, startTime);
      },
    });
    const jobId = `destroy-wait-${tag}`;
    // Not an agent: it ignores the shutdown step and ends by itself, 400 ms later.
    const ref = await backend.create({
      jobId,
      tenant: 'destroy-tenant',
      spec: SandboxSpecSchema.parse({ image: 'ignored', command: ['sleep', '0.4'] }),
      agent: { redisUrl: testRedisUrl(), keyStyle: 'tagged' },
    });
    checks = 0;
    const t0 = Date.now();
    await backend.destroy(ref, { graceMs: 10_000 });
    // Once before the shutdown is asked for; polled every 10–100 ms it was 8 or more.
    expect(checks).toBe(1);
    // Ended by its exit, not by the grace.
    expect(Date.now() - t0).toBeLessThan(5000);
    expect((await backend.list()).filter((s) => s.jobId === jobId)).toEqual([]);
  });
});
