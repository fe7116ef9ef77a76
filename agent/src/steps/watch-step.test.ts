import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type WatchEvent, type WatchStep, WatchStepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { recordingContext } from './recording-context.js';
import { watchStep } from './watch-step.js';

// The watch step on a real directory (inotify): its first line once it watches, then each
// change; with recursive, directories made after it started are watched too.

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-watch-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const step = (fields: Record<string, unknown>): WatchStep =>
  WatchStepSchema.parse({ schemaVersion: 1, stepId: 'watch-test', kind: 'watch', ...fields });

function watching(fields: Record<string, unknown>) {
  const r = recordingContext(dir);
  const stop = new AbortController();
  const events = () => r.text('stdout').map((l) => JSON.parse(l) as WatchEvent);
  const outcome = watchStep(step(fields), { ...r.ctx, signal: stop.signal });
  const started = vi.waitUntil(() => events().some((e) => e.type === 'watching'), { timeout: 10_000 });
  return { events, outcome, started, stop: () => stop.abort() };
}

describe('watchStep', () => {
  it('follows directories made after it started with recursive, and tells writes to old files', async () => {
    await mkdir(path.join(dir, 'tree'));
    await writeFile(path.join(dir, 'tree/old.txt'), 'x');
    const w = watching({ path: 'tree', recursive: true });
    await w.started;
    await mkdir(path.join(dir, 'tree/new'));
    await vi.waitUntil(() => w.events().some((e) => e.name === 'new' && e.type === 'create'), {
      timeout: 10_000,
    });
    await writeFile(path.join(dir, 'tree/new/deep.txt'), 'y');
    await writeFile(path.join(dir, 'tree/old.txt'), 'changed');
    await vi.waitUntil(
      () =>
        w.events().some((e) => e.name === 'new/deep.txt' && e.type === 'create') &&
        w.events().some((e) => e.name === 'old.txt' && e.type === 'write'),
      { timeout: 10_000 },
    );
    w.stop();
    const outcome = await w.outcome;
    expect(outcome.cancelled).toBe(true);
    expect(outcome.errorCode).toBe('cancelled');
  });

  it('refuses a path that is not there, or not a directory', async () => {
    const r = recordingContext(dir);
    expect((await watchStep(step({ path: 'nowhere' }), r.ctx)).errorCode).toBe('not_found');
    await writeFile(path.join(dir, 'file.txt'), 'z');
    expect((await watchStep(step({ path: 'file.txt' }), r.ctx)).errorCode).toBe('invalid_step');
  });
});
