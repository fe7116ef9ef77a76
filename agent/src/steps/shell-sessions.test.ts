import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ShellStepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordingContext } from './recording-context.js';
import { ShellSessions } from './shell-sessions.js';

// Long-lived shells (seeds/004), driven the way the agent drives them: one ShellSessions per
// agent, a recording context per command.
let dir: string;
const sessions = new ShellSessions();
beforeAll(async () => {
  dir = await realpath(await mkdtemp(path.join(tmpdir(), 'shell-sessions-')));
});
afterAll(async () => {
  sessions.killAll();
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function run(command: string, extra: Record<string, unknown> = {}) {
  const r = recordingContext(dir);
  const step = ShellStepSchema.parse({
    schemaVersion: 1,
    stepId: `s${++n}`,
    kind: 'shell',
    command,
    ...extra,
  });
  const outcome = await sessions.run(step, r.ctx);
  return { outcome, stdout: r.text('stdout'), stderr: r.text('stderr'), cancel: r };
}

describe('shell sessions', () => {
  it('keep the working directory and the environment from one command to the next', async () => {
    expect((await run('cd /tmp && export A=1')).outcome).toMatchObject({ exitCode: 0 });
    const next = await run('pwd; echo $A');
    expect(next.stdout).toEqual(['/tmp', '1']);
    expect(next.outcome).toEqual({ exitCode: 0, timedOut: false, errorMessage: null });
  });

  it('report each command its own exit code, stderr, and output without a final newline', async () => {
    const r = await run("echo out; echo err >&2; printf 'no newline'; false");
    expect(r.stdout).toEqual(['out', 'no newline']);
    expect(r.stderr).toEqual(['err']);
    expect(r.outcome.exitCode).toBe(1);
    // A command that reads stdin gets nothing (it cannot swallow the commands after it).
    const cat = await run('cat; echo after');
    expect(cat.stdout).toEqual(['after']);
  });

  it("run one session's commands in the order sent, and sessions side by side", async () => {
    const order: string[] = [];
    const first = run('sleep 0.3; echo one').then((r) => order.push(r.stdout.join()));
    const second = run('echo two').then((r) => order.push(r.stdout.join()));
    const other = run('pwd', { session: 'other' });
    expect((await other).stdout).toEqual([dir]);
    await Promise.all([first, second]);
    expect(order).toEqual(['one', 'two']);
  });

  it('kill a timed-out command with its session, say so, and start a fresh session next', async () => {
    await run('cd /tmp', { session: 'slow' });
    const timedOut = await run('sleep 30 & sleep 30', { session: 'slow', timeoutSeconds: 1 });
    expect(timedOut.outcome).toMatchObject({ timedOut: true, errorCode: 'timed_out' });
    expect(timedOut.outcome.errorMessage).toMatch(/session "slow" was killed .* start afresh/);
    // A new shell: back in the workspace, not in /tmp.
    expect((await run('pwd', { session: 'slow' })).stdout).toEqual([dir]);
  });

  it('a cancel ends the command the same way; `exit` ends the session and the next starts a new one', async () => {
    const r = recordingContext(dir);
    const step = ShellStepSchema.parse({
      schemaVersion: 1,
      stepId: 'c1',
      kind: 'shell',
      session: 'c',
      command: 'echo started; sleep 30',
    });
    const pending = sessions.run(step, r.ctx);
    await expect.poll(() => r.text('stdout')).toEqual(['started']);
    r.abort.abort();
    expect(await pending).toMatchObject({ cancelled: true, errorCode: 'cancelled' });
    const exited = await run('exit 3', { session: 'c' });
    expect(exited.outcome).toMatchObject({ exitCode: 3 });
    expect(exited.outcome.errorMessage).toMatch(/session "c" ended \(exit 3\)/);
    expect((await run('echo again', { session: 'c' })).stdout).toEqual(['again']);
  });
});
