import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyTestSandbox, type RedisServer, startRedisServer } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { InProcessBackend } from './inprocess-backend.js';

const password = `pw-${randomBytes(6).toString('hex')}`;
const root = join(tmpdir(), `sandstream-inprocess-pw-${randomBytes(4).toString('hex')}`);

describe('a Redis URL with a password', () => {
  let server: RedisServer | undefined;
  let redis: Redis;
  let url: string;

  beforeAll(async () => {
    // Its own server: requirepass on the shared Redis would lock everyone else out.
    server = await startRedisServer({ args: ['--requirepass', password] });
    url = `redis://:${password}@127.0.0.1:${server.port}`;
    redis = new Redis(url, { retryStrategy: (n) => (n > 50 ? null : 100) });
    redis.on('error', () => {});
    await redis.ping();
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  });

  it('reaches the agent through its environment, never its command line', async () => {
    const backend = new InProcessBackend({ redis, root });
    const jobId = `pw-${randomBytes(4).toString('hex')}`;
    const ref = await backend.create({
      jobId,
      tenant: 't',
      spec: SandboxSpecSchema.parse({ image: 'unused' }),
      agent: { redisUrl: url, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
    });
    try {
      // Ready means the agent authenticated: the server refuses everything without the password.
      await backend.waitReady(ref, 30_000, {
        isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
      });
      const cmdline = await readFile(`/proc/${ref.id}/cmdline`, 'utf8');
      expect(cmdline).toContain(jobId);
      expect(cmdline).not.toContain(password);
    } finally {
      await destroyTestSandbox(redis, backend, ref, 3000);
    }
  });
});
