import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '@sandstream/test-support';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { describe, expect, it } from 'vitest';
import { SandstreamClient } from '../client.js';

// The built CLI following a job whose record vanishes (Redis restarted empty): a private
// redis-server, flushed under it.
describe('sandstream CLI when the job vanishes', () => {
  const own = usePrivateRedis();

  it('prints "job <id> not found (Redis lost its data?)" and exits 4, not a hang or a stack trace', async () => {
    const client = new SandstreamClient({ redisUrl: own.server.url, namespace: 'vanish' });
    await client.submit({ id: 'vanish-cli', image: 'none', steps: [{ command: 'true' }] });
    await client.close();
    const child = spawn(
      process.execPath,
      [join(repoRoot, 'libs/client/dist/cli/main.js'), 'logs', '-f', 'vanish-cli'],
      {
        env: { ...process.env, REDIS_URL: own.server.url, SANDSTREAM_NAMESPACE: 'vanish' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // It is following once it has printed the job's first state.
    await expect.poll(() => stderr, { timeout: 20_000, interval: 50 }).toContain('● queued');
    await own.redis.flushall();
    expect(await exited).toBe(4);
    expect(stderr).toContain('sandstream: job vanish-cli not found (Redis lost its data?)');
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});
