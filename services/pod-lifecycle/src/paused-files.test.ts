import { Readable } from 'node:stream';
import type { PausedFilesStore } from '@sandstream/bus';
import { type SandboxBackend, type SandboxRef, wasCheckedWhole } from '@sandstream/sandbox';
import { describe, expect, it } from 'vitest';
import { PausedFiles } from './paused-files.js';
import type { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';

describe('a resume restoring a pause’s files', () => {
  it('hands the backend the stored bytes marked checked whole (the store found them whole)', async () => {
    const stored = Readable.from([Buffer.from('snapshot bytes')]);
    const store: PausedFilesStore = {
      put: async () => 'kept',
      get: async () => stored,
      stream: () => stored,
      delete: async () => {},
    };
    const restored: Array<{ same: boolean; checked: boolean }> = [];
    const backend = {
      kind: 'inprocess',
      async restoreFiles(_ref: SandboxRef, snapshot: AsyncIterable<Buffer>) {
        restored.push({ same: snapshot === stored, checked: wasCheckedWhole(snapshot) });
        return { entries: 0, bytes: 0, removed: 0, frozenMs: 0 };
      },
    } as unknown as SandboxBackend;
    // No lease to take here: the guard's own tests cover it.
    const freeze = { hold: (_id: string, _ref: SandboxRef, run: () => Promise<unknown>) => run() };
    const files = new PausedFiles(backend, freeze as unknown as SnapshotFreezeGuard, store);
    await files.restore({ jobId: 'job-1', backend: 'inprocess', id: 'sandbox-1' }, files.fetch('kept'));
    expect(restored).toEqual([{ same: true, checked: true }]);
  });
});
