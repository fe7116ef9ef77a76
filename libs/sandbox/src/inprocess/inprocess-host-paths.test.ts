import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyTestSandbox, testRedisUrl } from '@sandstream/test-support';
import { type StepResult, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxRef } from '../backend.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { StepChannel } from '../testing/step-channel.js';
import { InProcessBackend } from './inprocess-backend.js';

// Issue 27 §6: the in-process sandbox's directory stands for its `/`; what its agent answers
// names paths as the sandbox sees them (as a container would), never the host directory.
const redisUrl = testRedisUrl();
const tag = randomBytes(4).toString('hex');
const root = join(tmpdir(), `sandstream-inprocess-paths-${tag}`);
const registryKey = `sandstream:test:inprocess-paths:${tag}`;
const jobId = `paths-${tag}`;

describe('in-process sandbox: messages show in-sandbox paths only', () => {
  let redis: Redis;
  let blocking: Redis;
  let backend: InProcessBackend;
  let ref: SandboxRef;
  let channel: StepChannel;
  let workspace = '';
  beforeAll(async () => {
    redis = new Redis(redisUrl);
    blocking = new Redis(redisUrl);
    backend = new InProcessBackend({ redis, root, registryKey });
    ref = await backend.create({
      jobId,
      tenant: 'paths',
      spec: SandboxSpecSchema.parse({ image: 'unused' }),
      agent: { redisUrl, keyStyle: 'plain', heartbeatIntervalMs: 200 },
    });
    await backend.waitReady(ref, 30_000, {
      isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'plain').heartbeat)) === 1,
    });
    workspace = (JSON.parse((await redis.hget(registryKey, jobId)) as string) as { workspace: string })
      .workspace;
    channel = new StepChannel(redis, blocking, sandboxKeys(jobId, 'plain'));
  });
  afterAll(async () => {
    await destroyTestSandbox(redis, backend, ref, 2000).catch(() => {});
    await redis?.unlink(registryKey);
    redis?.disconnect();
    blocking?.disconnect();
    await rm(root, { recursive: true, force: true });
  });

  /** Asserts nothing of the host's directories is in the result. */
  const hostFree = (result: StepResult) => {
    const text = JSON.stringify(result);
    expect(workspace).not.toBe('');
    expect(text).not.toContain(workspace);
    expect(text).not.toContain(root);
  };

  it.each([
    [
      'readFile of a missing file',
      { kind: 'readFile', path: 'missing.txt' },
      'path /missing.txt does not exist',
    ],
    [
      'readFile of an absolute missing path',
      { kind: 'readFile', path: '/data/none' },
      'path /data/none does not exist',
    ],
    ['listFiles of a missing directory', { kind: 'listFiles', path: 'nodir' }, 'path /nodir does not exist'],
    [
      'grep in a missing directory',
      { kind: 'grep', pattern: 'x', path: 'nodir' },
      'path /nodir does not exist',
    ],
    [
      'a run step in a missing working directory',
      { command: 'true', workingDirectory: 'nodir' },
      'workingDirectory /nodir does not exist',
    ],
  ] as const)('%s', async (_what, step, message) => {
    const result = await channel.run({
      schemaVersion: 1,
      stepId: `s-${randomBytes(3).toString('hex')}`,
      ...step,
    });
    expect(result.errorCode).toBe('not_found');
    expect(result.errorMessage).toBe(message);
    hostFree(result);
  });

  it('a file step that succeeds names its path as the sandbox sees it', async () => {
    await channel.run({ schemaVersion: 1, stepId: 'w', kind: 'writeFile', path: 'sub/a.txt', content: 'hi' });
    const read = await channel.run({ schemaVersion: 1, stepId: 'r', kind: 'readFile', path: 'sub/a.txt' });
    expect(read.output).toMatchObject({ kind: 'readFile', path: '/sub/a.txt', content: 'hi' });
    hostFree(read);
    const listed = await channel.run({ schemaVersion: 1, stepId: 'l', kind: 'listFiles', path: 'sub' });
    expect(listed.output).toMatchObject({ kind: 'listFiles', path: '/sub' });
    hostFree(listed);
  });
});
