import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ProblemKinds, problemType } from '@sandstream/bus';
import { InfrastructureUnavailableError, SandstreamClient } from '@sandstream/client';
import {
  freePort,
  type RedisServer,
  type RunningService,
  repoRoot,
  startRedisServer,
  startService,
} from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');

// The API (a process of its own) on a private redis-server that is stopped under it: it answers
// that the infrastructure is unavailable (503, Retry-After, a problem of its own kind), which the
// SDK over HTTP reads back as InfrastructureUnavailableError and the CLI turns into exit 3 (125
// for exec), as over Redis.
describe('the API while its Redis is down', () => {
  let redis: RedisServer;
  let api: RunningService;
  let url: string;
  beforeAll(async () => {
    redis = await startRedisServer();
    const port = await freePort();
    api = await startService('api', {
      REDIS_URL: redis.url,
      SANDSTREAM_NAMESPACE: 'api-outage',
      API_PORT: String(port),
      API_ANONYMOUS: 'loopback',
    });
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await api?.stop(5000);
    await redis?.stop();
  });

  it('answers 503 with Retry-After and an infrastructure-unavailable problem; SDK and CLI say so', async () => {
    const client = new SandstreamClient({ url });
    try {
      expect(await client.get('j-1')).toBeNull();
      await redis.kill();

      const res = await fetch(`${url}/v1/jobs/j-1`);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await res.json()).toMatchObject({
        type: problemType(ProblemKinds.infrastructureUnavailable),
        status: 503,
        detail: expect.stringMatching(/unavailable/),
      });

      await expect(client.get('j-1')).rejects.toBeInstanceOf(InfrastructureUnavailableError);
      await expect(client.sandboxes.handle('s-1').exec('true')).rejects.toBeInstanceOf(
        InfrastructureUnavailableError,
      );
      await expect(client.submit({ image: 'none', steps: [{ command: 'true' }] })).rejects.toBeInstanceOf(
        InfrastructureUnavailableError,
      );

      const cli = (...args: string[]) =>
        spawnSync(process.execPath, [cliPath, ...args], {
          env: { ...process.env, REDIS_URL: '', SANDSTREAM_URL: url },
          encoding: 'utf8',
          timeout: 60_000,
        });
      const status = cli('status', 'j-1');
      expect(status.stderr).toMatch(/^sandstream: Sandstream is unavailable/);
      expect(status.status).toBe(3);
      const exec = cli('exec', 's-1', '--', 'true');
      expect(exec.stderr).toMatch(/^sandstream: Sandstream is unavailable/);
      expect(exec.status).toBe(125);
    } finally {
      await client.close();
    }
  }, 90_000);
});
