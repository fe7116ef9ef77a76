import { SANDBOX_MAX_RUNNING_COMMANDS } from '@sandstream/bus';
import { startService } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 27: `SandboxLimitError: … 64 commands running or waiting, at most 64` while 3 ran, during
// a step-dispatcher outage. The running count came down only when a dispatcher recorded a
// result, so with the dispatcher killed (kill -9, mid-flight) every command that ended stayed
// counted. The limit now follows what is really pending: more commands than the limit, one
// after another, all run while no dispatcher is up; and the count is right once one is back.
describe('live sandbox commands while the step-dispatcher is down', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ label: 'ldisp', env: { CLAIM_IDLE_MS: '2000' } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it(`runs more than ${SANDBOX_MAX_RUNNING_COMMANDS} commands in a row with the dispatcher killed`, async () => {
    const sandbox = await stack.client.sandboxes.create({ id: `${stack.namespace}-s`, image: 'none' });
    let dispatcherBack = false;
    const dispatcherAgain = async () => {
      stack.services.set('step-dispatcher', [await startService('step-dispatcher', stack.env)]);
      dispatcherBack = true;
    };
    try {
      // Two commands in flight when the dispatcher dies, one of them still running after.
      const long = sandbox.exec('sleep 3; echo long');
      expect((await sandbox.exec(['echo', 'before'])).stdout).toBe('before\n');
      for (const dispatcher of stack.services.get('step-dispatcher') ?? []) await dispatcher.kill9();
      const total = SANDBOX_MAX_RUNNING_COMMANDS + 6;
      for (let i = 0; i < total; i++) {
        const result = await sandbox.exec(['echo', `c${i}`]);
        expect(result).toMatchObject({ exitCode: 0, stdout: `c${i}\n` });
      }
      expect((await long).stdout).toBe('long\n');
      // A dispatcher again: it records what ended meanwhile, and the count is what runs (none).
      await dispatcherAgain();
      await expect
        .poll(async () => (await stack.client.get(sandbox.id))?.commandsRunning, { timeout: 60_000 })
        .toBe(0);
    } finally {
      // Also when a command was refused: a dispatcher carries out the close, so no agent outlives the test.
      if (!dispatcherBack) await dispatcherAgain();
      await sandbox.close().catch(() => undefined);
    }
  }, 240_000);
});
