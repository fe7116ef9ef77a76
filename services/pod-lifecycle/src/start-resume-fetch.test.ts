import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { PausedFilesStore } from '@sandstream/bus';
import {
  type CreateSandboxRequest,
  captureTree,
  encodeSnapshot,
  InProcessBackend,
  type SandboxRef,
  SandboxStartError,
  type WaitReadyOptions,
} from '@sandstream/sandbox';
import { beforeAll, describe, expect, it } from 'vitest';
import { PausedFiles } from './paused-files.js';
import type { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';
import { useStartProcessor } from './testing/start-processor-harness.js';

/**
 * A resume reads its kept files while its new sandbox is made (FetchedKeptFiles), as a start from
 * a snapshot does, and, where the backend restores while the agent boots (in-process), writes
 * them then: before, the whole read and the restore came after the agent was up, on the resume's
 * path. The kept copy is let go of only once the agent is up.
 */

/** What happened, in order: the store's reads and the backend's creates. */
const events: string[] = [];
/** The kept files' streams the store handed out, to see which were let go of. */
const handedOut: Readable[] = [];
let failCreate = false;
let failReady = false;
/** The stream cut short, as a store read that fails at its end is. */
let damagedRead = false;

class RecordingBackend extends InProcessBackend {
  override async create(request: CreateSandboxRequest): Promise<SandboxRef> {
    events.push('create begun');
    if (failCreate) throw new Error('the engine refused the create (test)');
    const ref = await super.create(request);
    events.push('create done');
    return ref;
  }

  override async restoreFiles(ref: SandboxRef, snapshot: AsyncIterable<Buffer>) {
    events.push('restore begun');
    return super.restoreFiles(ref, snapshot);
  }

  override async waitReady(ref: SandboxRef, deadlineMs: number, options: WaitReadyOptions): Promise<void> {
    if (failReady) throw new SandboxStartError('agent_crashed', 'the agent never came up (test)');
    await super.waitReady(ref, deadlineMs, options);
    events.push('agent up');
  }
}
const { root, store, scheduledJob, runCreate } = useStartProcessor({
  name: 'rf',
  installation: 'resume-fetch-test',
  backend: (options) => new RecordingBackend(options),
  deps: ({ backend }) => ({
    files: new PausedFiles(backend, freeze as unknown as SnapshotFreezeGuard, filesStore),
  }),
});

/** Snapshot bytes of a work tree holding hello.txt, as a pause of an in-process sandbox keeps them. */
async function keptBytes(): Promise<Buffer> {
  const dir = join(root, 'kept-source');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'hello.txt'), 'kept before the pause\n');
  const chunks: Buffer[] = [];
  for await (const chunk of encodeSnapshot(captureTree(dir, 'work'))) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

let bytes: Buffer;
const filesStore: PausedFilesStore = {
  put: async () => 'unused',
  located: (kept) => ({ objectId: kept, sizeBytes: bytes.length, sha256: '0'.repeat(64) }),
  get: async (kept) => {
    events.push(`get ${kept}`);
    const stream = Readable.from([bytes]);
    handedOut.push(stream);
    return stream;
  },
  stream: (kept) => {
    events.push(`stream ${kept}`);
    const stream = Readable.from([damagedRead ? bytes.subarray(0, bytes.length - 10) : bytes]);
    handedOut.push(stream);
    return stream;
  },
  delete: async () => {},
};
// No lease to take here: the guard's own tests cover it.
const freeze = { hold: (_id: string, _ref: SandboxRef, run: () => Promise<unknown>) => run() };

beforeAll(async () => {
  bytes = await keptBytes();
});

/** A scheduled job whose record names kept files, as a paused sandbox's does when it resumes. */
async function resumingJob(name: string): Promise<string> {
  const id = await scheduledJob(name);
  expect(await store.setPausedFiles(id, `kept-${name}`)).toBe(true);
  return id;
}

describe('a resume’s kept files', () => {
  it('are streamed from the store into the new sandbox while its agent boots', async () => {
    events.length = 0;
    const jobId = await resumingJob('order');
    expect(await runCreate(jobId)).toBe('dispatched');
    // Asked for with the start, written from the sandbox's create on, not after the agent was up;
    // streamed (in-process restores while the agent boots), not first read whole.
    expect(events).toEqual([`stream kept-order`, 'create begun', 'create done', 'restore begun', 'agent up']);
    const state = readdirSync(join(root, 'jobs')).find((d) => d.startsWith(`${jobId}-`));
    expect(state).toBeDefined();
    expect(readFileSync(join(root, 'jobs', state as string, 'work', 'hello.txt'), 'utf8')).toBe(
      'kept before the pause\n',
    );
    // Restored: the record no longer names them.
    expect((await store.get(jobId))?.pausedFiles).toBeUndefined();
  });

  it('are let go of when the start fails before using them, and stay named by the record', async () => {
    events.length = 0;
    handedOut.length = 0;
    failCreate = true;
    try {
      const jobId = await resumingJob('failed');
      await runCreate(jobId).catch(() => undefined);
      expect(events).toEqual([`stream kept-failed`, 'create begun']);
      expect(handedOut).toHaveLength(1);
      await expect.poll(() => handedOut[0]?.destroyed, { timeout: 10_000 }).toBe(true);
      expect((await store.get(jobId))?.pausedFiles).toBe('kept-failed');
    } finally {
      failCreate = false;
    }
  });

  it('fail the start, and stay named by the record, when their read turns out cut short at its end', async () => {
    events.length = 0;
    damagedRead = true;
    try {
      const jobId = await resumingJob('cut');
      await runCreate(jobId).catch(() => undefined);
      expect(events).toContain('restore begun');
      // Never running with part of its files: the start failed, the kept files still named.
      const record = await store.get(jobId);
      expect(record?.state).not.toBe('running');
      expect(record?.pausedFiles).toBe('kept-cut');
    } finally {
      damagedRead = false;
    }
  });

  it('stay named by the record when the agent never comes up after they were restored', async () => {
    events.length = 0;
    failReady = true;
    try {
      const jobId = await resumingJob('never-up');
      await runCreate(jobId).catch(() => undefined);
      expect(events).toContain('restore begun');
      expect(events).not.toContain('agent up');
      // The start's retry (or a later resume) still finds them: nothing was lost with the sandbox.
      expect((await store.get(jobId))?.pausedFiles).toBe('kept-never-up');
    } finally {
      failReady = false;
    }
  });
});
