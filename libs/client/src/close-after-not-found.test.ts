import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { describe, expect, it } from 'vitest';

// Issue 27 §6: a process that follows a job that does not exist, catches JobNotFoundError and
// closes its client must end by itself; a connection left open keeps Node's event loop alive.
// Each follow form runs in a child process of its own, which must exit on its own, 0.
const clientDir = fileURLToPath(new URL('..', import.meta.url));

describe('client.close() after follow() throws JobNotFoundError', () => {
  const own = usePrivateRedis();

  it.each([
    ['follow()', '{}'],
    ['follow({ untilNow: true })', '{ untilNow: true }'],
    ['followPages({ untilNow: true })', '{ untilNow: true }'],
  ])('%s: the process exits by itself', (form, options) => {
    const call = form.startsWith('followPages') ? 'followPages' : 'follow';
    const script = `
      import { SandstreamClient, JobNotFoundError } from '@sandstream/client';
      const client = new SandstreamClient({ redisUrl: ${JSON.stringify(own.server.url)}, namespace: 'close-probe' });
      let caught;
      try { for await (const _ of client.${call}('never-there', ${options})) {} } catch (err) { caught = err; }
      if (!(caught instanceof JobNotFoundError)) { console.error('not JobNotFoundError:', caught); process.exitCode = 2; }
      await client.close();
    `;
    // The bound is generous: an exit within seconds passes, a process kept alive never exits.
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: clientDir,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.signal, `still running after 30 s: ${run.stderr}`).toBeNull();
    expect(run.status, run.stderr).toBe(0);
  });
});
