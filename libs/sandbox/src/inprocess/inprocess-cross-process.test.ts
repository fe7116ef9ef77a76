import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { InProcessBackend } from './inprocess-backend.js';
import { isProcessAlive } from './process-control.js';

const run = promisify(execFile);
const redisUrl = testRedisUrl();
const tag = randomBytes(4).toString('hex');
const root = join(tmpdir(), `sandstream-inprocess-xproc-${tag}`);
const registryKey = `sandstream:test:inprocess-xproc:${tag}`;
const distIndex = fileURLToPath(new URL('../../dist/index.js', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));

/** Runs the built backend in a separate Node process, as another service replica would. */
async function inOtherProcess(action: 'list' | 'destroy', jobId: string, id: string): Promise<unknown> {
  const script = `
    import { Redis } from 'ioredis';
    import { InProcessBackend } from ${JSON.stringify(distIndex)};
    const redis = new Redis(${JSON.stringify(redisUrl)});
    const backend = new InProcessBackend({ redis, root: ${JSON.stringify(root)}, registryKey: ${JSON.stringify(registryKey)} });
    const out = ${JSON.stringify(action)} === 'list'
      ? await backend.list()
      : (await backend.destroy({ jobId: ${JSON.stringify(jobId)}, backend: 'inprocess', id: ${JSON.stringify(id)} }, { graceMs: 3000 }), 'destroyed');
    console.log(JSON.stringify(out));
    redis.disconnect();
  `;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot });
  return JSON.parse(stdout);
}

describe('InProcessBackend state lives outside the process that made the sandbox', () => {
  let redis: Redis;
  beforeAll(() => {
    if (!existsSync(distIndex))
      throw new Error(`${distIndex} is missing: build with npx tsc -b libs/sandbox`);
    redis = new Redis(redisUrl);
  });
  afterAll(async () => {
    await redis.unlink(registryKey);
    // The job's keys are not the backend's to free (tearDownSandbox's, libs/bus): the test's own.
    await deleteNamespaceKeys(redis, `xproc-${tag}`);
    redis.disconnect();
    await rm(root, { recursive: true, force: true });
  });

  it('another OS process lists the sandbox and destroys it: agent killed, workspace and record gone', async () => {
    const backend = new InProcessBackend({ redis, root, registryKey });
    const jobId = `xproc-${tag}`;
    const ref = await backend.create({
      jobId,
      tenant: 'xproc-tenant',
      spec: SandboxSpecSchema.parse({ image: 'unused', labels: { origin: 'first-process' } }),
      agent: { redisUrl, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
    });
    await backend.waitReady(ref, 30_000, {
      isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
    });
    const record = await redis.hget(registryKey, jobId);
    const { workspace, startTime } = JSON.parse(record as string) as { workspace: string; startTime: string };

    const listed = (await inOtherProcess('list', jobId, ref.id)) as {
      jobId: string;
      state: string;
      labels: object;
    }[];
    expect(listed).toEqual([
      expect.objectContaining({ jobId, id: ref.id, tenant: 'xproc-tenant', state: 'running' }),
    ]);
    expect(listed[0]?.labels).toMatchObject({ origin: 'first-process' });

    expect(await inOtherProcess('destroy', jobId, ref.id)).toBe('destroyed');
    expect(await isProcessAlive(Number(ref.id), startTime)).toBe(false);
    expect(existsSync(workspace)).toBe(false);
    expect(await redis.hexists(registryKey, jobId)).toBe(0);
    expect(await backend.list()).toEqual([]);
  });
});
