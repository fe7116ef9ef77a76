import { createKeySpace, stepResultField } from '@sandstream/bus';
import {
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxFileError,
  SandboxNotFoundError,
  type WatchEvent,
} from '@sandstream/client';
import { testRedisUrl } from '@sandstream/test-support';
import { resultKey } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TRANSPORTS, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// A command's open stdin and directory watching through the SDK, over Redis and over the HTTP
// API (POST/DELETE …/processes/{id}/stdin, POST …/watch): the same calls, the same answers.

const redisUrl = testRedisUrl();

describe('open stdin and watching, over both transports', () => {
  let stack: Stack;
  const views = new Map<string, TransportView>();
  beforeAll(async () => {
    stack = await startStack({ label: 'stdinw' });
    for (const transport of TRANSPORTS) views.set(transport, await viewThrough(stack, transport, redisUrl));
  }, 120_000);
  afterAll(async () => {
    for (const view of views.values()) await view.stop();
    await stack?.stop();
  });

  for (const transport of TRANSPORTS) {
    it(`feeds a command's open stdin as written and closes it (${transport})`, async () => {
      const view = views.get(transport) as TransportView;
      await using sandbox = await view.client.sandboxes.create({ image: 'debian:bookworm-slim' });
      let started: (id: string) => void = () => {};
      const id = new Promise<string>((resolve) => {
        started = resolve;
      });
      const lines: string[] = [];
      const running = sandbox.exec(['sh', '-c', 'while read -r l; do echo "got $l"; done; echo eof'], {
        openStdin: true,
        onStart: started,
        onStdout: (line) => lines.push(line),
      });
      const commandId = await id;
      await sandbox.writeStdin(commandId, 'one\n');
      await vi.waitUntil(() => lines.includes('got one'), { timeout: 20_000 });
      await sandbox.writeStdin(commandId, new TextEncoder().encode('two\nthree\n'));
      await sandbox.closeStdin(commandId);
      expect(await running).toMatchObject({ exitCode: 0, stdout: 'got one\ngot two\ngot three\neof\n' });

      // An ended command's stdin, one never opened, an unknown command: each named.
      await expect(sandbox.writeStdin(commandId, 'late\n')).rejects.toBeInstanceOf(
        SandboxCommandNotFoundError,
      );
      const closedOne = sandbox.exec('sleep 30');
      await vi.waitUntil(async () => (await sandbox.history()).some((c) => c.command === 'sleep 30'));
      const sleeper = (await sandbox.history()).find((c) => c.command === 'sleep 30')?.id as string;
      await expect(sandbox.writeStdin(sleeper, 'x')).rejects.toBeInstanceOf(SandboxConflictError);
      await expect(sandbox.writeStdin(sleeper, 'x')).rejects.toThrow(/not started with openStdin/);
      await expect(sandbox.closeStdin('cmd-nosuch')).rejects.toBeInstanceOf(SandboxCommandNotFoundError);
      await sandbox.cancel(sleeper);
      await closedOne;
    });

    it(`watches a directory: each change told, stopped on demand (${transport})`, async () => {
      const view = views.get(transport) as TransportView;
      await using sandbox = await view.client.sandboxes.create({ image: 'debian:bookworm-slim' });
      await sandbox.exec('mkdir -p watched/sub');
      const events: WatchEvent[] = [];
      const watch = await sandbox.files.watch('watched', { recursive: true, onEvent: (e) => events.push(e) });
      await sandbox.files.write('watched/a.txt', 'a');
      await sandbox.files.write('watched/sub/b.txt', 'b');
      await sandbox.exec('rm watched/a.txt');
      await vi.waitUntil(
        () =>
          events.some((e) => e.type === 'create' && e.name === 'sub/b.txt') &&
          events.some((e) => e.type === 'remove' && e.name === 'a.txt'),
        { timeout: 20_000, interval: 50 },
      );
      expect(events.some((e) => e.type === 'create' && e.name === 'a.txt')).toBe(true);
      await watch.stop();
      expect(await watch.done).toMatchObject({ cancelled: true });
      // A path that is no directory fails the call, as the other file calls do.
      await expect(sandbox.files.watch('nosuch', { onEvent: () => {} })).rejects.toBeInstanceOf(
        SandboxFileError,
      );
    });
  }

  it("refuses input to a command whose result is still on the agent's key, not yet moved (Redis)", async () => {
    // The moment between the agent's `completed` event (which resolves exec) and the dispatcher
    // moving its result into the record: set up by hand by moving the result back.
    const view = views.get('redis') as TransportView;
    await using sandbox = await view.client.sandboxes.create({ image: 'debian:bookworm-slim' });
    let commandId = '';
    await sandbox.exec('true', {
      openStdin: true,
      onStart: (id) => {
        commandId = id;
      },
    });
    const keys = createKeySpace(stack.namespace);
    const field = stepResultField(commandId);
    const result = (await vi.waitUntil(() => stack.redis.hget(keys.job(sandbox.id), field), {
      timeout: 10_000,
    })) as string;
    expect(JSON.parse(result)).toMatchObject({ stepId: commandId });
    await stack.redis
      .multi()
      .hdel(keys.job(sandbox.id), field)
      .set(resultKey(keys.sandbox(sandbox.id), commandId), result, 'EX', 60)
      .exec();
    await expect(sandbox.writeStdin(commandId, 'late\n')).rejects.toThrow(/has ended/);
  });

  it("refuses another tenant's command input as a missing sandbox (Redis)", async () => {
    const view = views.get('redis') as TransportView;
    await using sandbox = await view.client.sandboxes.create({
      image: 'debian:bookworm-slim',
      tenant: 'stdin-a',
    });
    const other = view.client.sandboxes.handle(sandbox.id, { tenant: 'stdin-b' });
    await expect(other.writeStdin('cmd-1', 'x')).rejects.toBeInstanceOf(SandboxNotFoundError);
    await expect(other.closeStdin('cmd-1')).rejects.toBeInstanceOf(SandboxNotFoundError);
  });
});
