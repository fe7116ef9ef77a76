import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  type CommandInput,
  commandInputKey,
  encodeCommandInput,
  type RunStep,
  RunStepSchema,
  sandboxKeys,
} from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../logger.js';
import type { ProcessLauncher } from '../process/launcher.js';
import { NodeLauncher } from '../process/node-launcher.js';
import { SpawnerLauncher } from '../process/spawner-launcher.js';
import { builtSpawnerPath, testClient } from '../testing/agent-harness.js';
import { useTestRedis } from '../testing/test-redis.js';
import { recordingContext } from './recording-context.js';
import { runStep } from './run-step.js';
import { StdinChannel } from './stdin-stream.js';

// A run step with an open stdin (stdinStream) against the real Redis: what clients push to the
// command's input list reaches the process while it runs, an end message is its EOF, and a
// process that never reads its stdin still ends. Both launchers open the named pipe as fd 0.

const { redis, cleanups } = useTestRedis();
const keys = sandboxKeys(`stdin-test-${randomUUID()}`);
const channel = new StdinChannel(keys, () => testClient());
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-stdin-stream-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const step = (stepId: string, fields: Record<string, unknown>): RunStep =>
  RunStepSchema.parse({ schemaVersion: 1, stepId, kind: 'run', stdinStream: true, ...fields });

async function send(stepId: string, input: CommandInput): Promise<void> {
  const key = commandInputKey(keys, stepId);
  cleanups.push(() => redis.del(key));
  await redis.lpush(key, ...encodeCommandInput(input));
}

const launchers: [string, () => ProcessLauncher][] = [
  ['node', () => new NodeLauncher()],
  [
    'spawner',
    () => new SpawnerLauncher(builtSpawnerPath(), createLogger({ verbose: false, write: () => {} })),
  ],
];

describe.each(launchers)('an open stdin with the %s launcher', (name, makeLauncher) => {
  let launcher: ProcessLauncher;
  beforeAll(() => {
    launcher = makeLauncher();
  });
  afterAll(() => launcher.close());

  it('delivers input as it is pushed, and the end message is EOF', async () => {
    const id = `lines-${name}`;
    const r = recordingContext(dir);
    const running = runStep(
      step(id, { command: 'sh', args: ['-c', 'while read l; do echo "got $l"; done; echo eof'] }),
      r.ctx,
      { launcher, stdin: channel },
    );
    await send(id, { kind: 'data', data: Buffer.from('one\n') });
    // Answered before any end: the line reached the process while it ran.
    await vi.waitUntil(() => r.text('stdout').includes('got one'), { timeout: 10_000, interval: 50 });
    await send(id, { kind: 'data', data: Buffer.from('two\n') });
    await send(id, { kind: 'end' });
    expect((await running).exitCode).toBe(0);
    expect(r.text('stdout')).toEqual(['got one', 'got two', 'eof']);
    // The pipe is gone and the input list with it.
    expect(await redis.exists(commandInputKey(keys, id))).toBe(0);
  }, 30_000);

  it('passes more than a pipe holds, byte for byte, to a slow reader', async () => {
    const id = `bulk-${name}`;
    const r = recordingContext(dir);
    const running = runStep(
      step(id, { command: 'sh', args: ['-c', 'sleep 1; od -An -tx1 -v | tr -d " \\n" | md5sum; echo'] }),
      r.ctx,
      { launcher, stdin: channel },
    );
    const data = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7) % 256;
    await send(id, { kind: 'data', data });
    await send(id, { kind: 'end' });
    expect((await running).exitCode).toBe(0);
    const { createHash } = await import('node:crypto');
    const expected = createHash('md5').update(data.toString('hex')).digest('hex');
    expect(r.text('stdout')[0]).toBe(`${expected}  -`);
  }, 60_000);

  it('ends a process that never reads its stdin, and removes the named pipe', async () => {
    const id = `unread-${name}`;
    const r = recordingContext(dir);
    const outcome = await runStep(
      step(id, { command: 'sh', args: ['-c', 'ls -l /proc/self/fd/0 | sed "s/.*-> //"'] }),
      r.ctx,
      { launcher, stdin: channel },
    );
    expect(outcome.exitCode).toBe(0);
    const fifo = r.text('stdout')[0] ?? '';
    expect(fifo).toMatch(/sandstream-stdin-.*\/stdin/);
    expect(existsSync(fifo.replace(/ \(deleted\)$/, ''))).toBe(false);
  }, 30_000);
});

describe('an open stdin refused', () => {
  it('without the Redis channel, and together with a fixed stdin', async () => {
    const r = recordingContext(dir);
    const without = await runStep(step('no-channel', { command: 'cat' }), r.ctx);
    expect(without.errorMessage).toMatch(/stdinStream.*Redis/);
    const both = await runStep(step('both', { command: 'cat', stdin: 'x' }), r.ctx, { stdin: channel });
    expect(both.errorMessage).toMatch(/either stdin or stdinStream/);
  });
});
