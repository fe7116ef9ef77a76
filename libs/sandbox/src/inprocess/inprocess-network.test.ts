import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxStartError } from '../backend.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { InProcessBackend } from './inprocess-backend.js';

// Issue 31 §2: a child process shares this machine's network, so the in-process backend takes
// only its default network and refuses a policy it could not hold, before anything is started.
const redisUrl = testRedisUrl();
const tag = randomBytes(4).toString('hex');
const root = join(tmpdir(), `sandstream-inprocess-network-${tag}`);
const registryKey = `sandstream:test:inprocess-network:${tag}`;
const redis = new Redis(redisUrl);
afterAll(async () => {
  await redis.unlink(registryKey);
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
});

describe('in-process backend: network policies', () => {
  it('refuses none, deny-egress and an allow-list, saying why; nothing is registered', async () => {
    const backend = new InProcessBackend({ redis, root, registryKey });
    for (const network of ['deny-egress', { egress: 'none' }, { egress: { allow: ['10.0.0.0/8'] } }]) {
      const err = await backend
        .create({
          jobId: `net-${tag}`,
          tenant: 'network',
          spec: SandboxSpecSchema.parse({ image: 'unused', network }),
          agent: { redisUrl, keyStyle: 'plain', heartbeatIntervalMs: 200 },
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SandboxStartError);
      expect((err as Error).message).toMatch(
        /in-process backend runs steps as processes on this machine's network and cannot restrict it/,
      );
    }
    expect(await redis.hlen(registryKey)).toBe(0);
  });
});
