import { randomBytes } from 'node:crypto';
import { readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectTestRedis, destroyTestSandbox, testRedisUrl } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { InProcessBackend } from './inprocess-backend.js';

const root = join(tmpdir(), `sandstream-inprocess-home-${randomBytes(4).toString('hex')}`);
const redis = connectTestRedis();
afterAll(async () => {
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
});

async function environOf(pid: string): Promise<Record<string, string>> {
  const raw = await readFile(`/proc/${pid}/environ`, 'utf8');
  return Object.fromEntries(
    raw
      .split('\0')
      .filter((entry) => entry.includes('='))
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
}

/**
 * A sandbox's HOME is its own directory, never the host user's: with the host's, an interactive
 * bash in every terminal ran the host's ~/.bashrc (whose `pyenv rehash` waited 60 s on a lock file
 * a killed terminal had left, and the terminals of a CI run hung one after another).
 */
describe('the in-process sandbox home', () => {
  it.each([
    { name: 'is the sandbox’s directory, not the host’s HOME', env: {}, home: 'workspace' },
    { name: 'is what the spec sets, when it sets HOME', env: { HOME: '/spec/home' }, home: '/spec/home' },
  ])('$name', async ({ env, home }) => {
    const backend = new InProcessBackend({ redis, root });
    const jobId = `home-${randomBytes(4).toString('hex')}`;
    const ref = await backend.create({
      jobId,
      tenant: 't',
      spec: SandboxSpecSchema.parse({ image: 'unused', env }),
      agent: { redisUrl: testRedisUrl(), keyStyle: 'tagged' },
    });
    try {
      await backend.waitReady(ref, 30_000, {
        isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
      });
      const workspace = await readlink(`/proc/${ref.id}/cwd`);
      const environ = await environOf(ref.id);
      expect(process.env.HOME).toBeDefined();
      expect(environ.HOME).not.toBe(process.env.HOME);
      expect(environ.HOME).toBe(home === 'workspace' ? workspace : home);
    } finally {
      await destroyTestSandbox(redis, backend, ref, 3000);
    }
  });
});
