import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Step, StepOutputSchema, StepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeStep } from './execute-step.js';
import { recordingContext } from './recording-context.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-exec-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('executeStep', () => {
  it('runs a seed-style run step (kind omitted)', async () => {
    const r = recordingContext(dir);
    const step = StepSchema.parse({ schemaVersion: 1, stepId: 's', command: 'echo', args: ['hello'] });
    expect(await executeStep(step, r.ctx)).toEqual({ exitCode: 0, timedOut: false, errorMessage: null });
    expect(r.text('stdout')).toEqual(['hello']);
  });

  it('refuses shutdown, which belongs to the loop', async () => {
    const step = StepSchema.parse({ schemaVersion: 1, stepId: 's', kind: 'shutdown' });
    const outcome = await executeStep(step, recordingContext(dir).ctx);
    expect(outcome.errorCode).toBe('invalid_step');
  });

  it('turns an unexpected exception into an internal error result instead of throwing', async () => {
    // A step that skipped schema parsing (args missing) makes the executor itself fail.
    const broken = {
      schemaVersion: 1,
      stepId: 's',
      kind: 'run',
      command: 'echo',
      shell: true,
    } as unknown as Step;
    const outcome = await executeStep(broken, recordingContext(dir).ctx);
    expect(outcome).toMatchObject({ errorCode: 'internal', exitCode: null });
    expect(outcome.errorMessage).toMatch(/run step failed unexpectedly/);
  });
});

describe('executeStep: file kinds', () => {
  it('writes then reads a file', async () => {
    const ctx = recordingContext(dir).ctx;
    const write = StepSchema.parse({
      schemaVersion: 1,
      stepId: 'w',
      kind: 'writeFile',
      path: 'x/y.txt',
      content: 'round trip',
    });
    expect((await executeStep(write, ctx)).output).toMatchObject({ kind: 'writeFile', bytesWritten: 10 });
    const read = StepSchema.parse({ schemaVersion: 1, stepId: 'r', kind: 'readFile', path: 'x/y.txt' });
    expect((await executeStep(read, ctx)).output).toMatchObject({ kind: 'readFile', content: 'round trip' });
  });
});

describe('executeStep: listFiles and grep', () => {
  it('dispatches both, with results shaped by the wire schema', async () => {
    const ctx = recordingContext(dir).ctx;
    const write = StepSchema.parse({
      schemaVersion: 1,
      stepId: 'w',
      kind: 'writeFile',
      path: 'g/one.txt',
      content: 'alpha\nbeta\n',
    });
    await executeStep(write, ctx);
    const list = StepSchema.parse({ schemaVersion: 1, stepId: 'l', kind: 'listFiles', path: 'g' });
    const listed = await executeStep(list, ctx);
    expect(StepOutputSchema.parse(listed.output)).toMatchObject({
      kind: 'listFiles',
      entries: [{ path: 'one.txt', type: 'file', sizeBytes: 11 }],
    });
    const grep = StepSchema.parse({
      schemaVersion: 1,
      stepId: 'g',
      kind: 'grep',
      pattern: 'be.a',
      path: 'g',
    });
    const found = await executeStep(grep, ctx);
    expect(StepOutputSchema.parse(found.output)).toMatchObject({
      kind: 'grep',
      matches: [{ path: 'one.txt', line: 2, column: 1, text: 'beta' }],
      truncated: false,
    });
  });
});
