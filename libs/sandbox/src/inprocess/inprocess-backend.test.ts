import { randomBytes } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { registerBackendSuite } from '../testing/backend-suite.js';
import { InProcessBackend } from './inprocess-backend.js';

const redisUrl = testRedisUrl();
const root = join(tmpdir(), `sandstream-inprocess-test-${randomBytes(4).toString('hex')}`);
const registryKey = `sandstream:test:inprocess:${randomBytes(4).toString('hex')}`;

registerBackendSuite({
  name: 'in-process',
  redisUrl,
  createBackend: (redis) => new InProcessBackend({ redis, root, registryKey }),
  agent: { heartbeatIntervalMs: 200 },
  spec: { image: 'ignored-by-inprocess' },
  missingImage: false,
  leftovers: async (jobId) => {
    const jobs = await readdir(join(root, 'jobs')).catch(() => []);
    return jobs.filter((name) => name.startsWith(`${jobId}-`));
  },
  removePersistentWorkspace: (name) => rm(join(root, 'persistent', name), { recursive: true, force: true }),
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  const redis = new Redis(redisUrl);
  await redis.unlink(registryKey);
  redis.disconnect();
});
