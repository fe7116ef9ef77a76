import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 31 §2: the in-process backend cannot enforce an egress policy, so a change on a running
// sandbox is refused, saying why, over HTTP and the CLI; a bad command line costs no round trip.
const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');

describe('sandbox network update on the in-process backend', () => {
  let stack: Stack;
  let http: TransportView;
  beforeAll(async () => {
    stack = await startStack({ label: 'netinp' });
    http = await viewThrough(stack, 'http', testRedisUrl());
  });
  afterAll(async () => {
    await http?.stop();
    await stack?.stop();
  });
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, [cliPath, ...args, ...http.cliFlags], { encoding: 'utf8', timeout: 60_000 });

  it('answers 409 naming why, and the CLI says the same', async () => {
    const id = `${stack.namespace}-inp`;
    await using _sandbox = await stack.client.sandboxes.create({ id, image: 'debian:bookworm-slim' });
    const answer = await fetch(`${http.url}/v1/sandboxes/${encodeURIComponent(id)}/network`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ egress: 'none' }),
    });
    expect(answer.status).toBe(409);
    expect((await answer.json()) as { detail: string }).toMatchObject({
      detail: expect.stringContaining('inprocess backend cannot enforce an egress policy'),
    });
    const refused = cli('sandbox', 'network', id, '--none');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('cannot enforce an egress policy');
  }, 60_000);

  it('refuses a command line with no policy, two policies or a bad entry (exit 2)', () => {
    for (const flags of [
      [],
      ['--none', '--internet'],
      ['--allow', '10.0.0.0/8', '--none'],
      ['--allow', 'nope!'],
    ]) {
      const run = cli('sandbox', 'network', 'some-id', ...flags);
      expect(run.status, run.stderr).toBe(2);
    }
    expect(cli('sandbox', 'network', 'some-id', '--allow', 'nope!').stderr).toContain('"nope!"');
  });
});
