import { join } from 'node:path';
import type { FilesCapture, FilesCopied, FilesRestored } from '../backend.js';
import { frozenCapture } from '../snapshot/frozen-capture.js';
import { decodeSnapshot } from '../snapshot/snapshot-codec.js';
import { SnapshotCorruptError } from '../snapshot/snapshot-entry.js';
import { captureTree } from '../snapshot/tree-capture.js';
import { copyTree, replaceTreeContents } from '../snapshot/tree-copy.js';
import { TreeRestore } from '../snapshot/tree-restore.js';
import { freezeProcessTree } from './process-control.js';
import type { InProcessRecord } from './sandbox-registry.js';

/** The one part an in-process sandbox has: its work directory (no boundary holds anything else). */
const WORK = 'work';

/** The work directory, every process below the agent stopped while it is read. */
export function captureInProcess(record: InProcessRecord): Promise<FilesCapture> {
  return frozenCapture({
    freeze: () => freezeProcessTree(record.pid, record.startTime),
    entries: () => captureTree(record.workspace, WORK),
    parts: [WORK],
  });
}

/** The work directory made exactly the snapshot's `work/` part, the processes left stopped meanwhile. */
export async function restoreInProcess(
  record: InProcessRecord,
  snapshot: AsyncIterable<Buffer>,
): Promise<FilesRestored> {
  const started = performance.now();
  const thaw = await freezeProcessTree(record.pid, record.startTime);
  try {
    const tree = new TreeRestore(record.workspace, WORK);
    try {
      for await (const restored of decodeSnapshot(snapshot)) {
        if (!restored.entry.path.startsWith(`${WORK}/`)) {
          throw new SnapshotCorruptError(
            `snapshot entry ${restored.entry.path} is outside the work tree: it was taken on a backend that captures more (Docker's container layer); an in-process sandbox restores only work/`,
          );
        }
        await tree.apply(restored);
      }
      const counts = await tree.finish();
      return { ...counts, frozenMs: Math.round(performance.now() - started) };
    } finally {
      tree.close();
    }
  } finally {
    thaw();
  }
}

/** The work directory copied to `<into>/work`, every process below the agent stopped meanwhile. */
export async function copyInProcess(record: InProcessRecord, into: string): Promise<FilesCopied> {
  const started = performance.now();
  const thaw = await freezeProcessTree(record.pid, record.startTime);
  try {
    await copyTree(record.workspace, join(into, WORK));
  } finally {
    thaw();
  }
  return { parts: [WORK], frozenMs: Math.round(performance.now() - started) };
}

/** The work directory made exactly a copyInProcess tree (`<from>/work`), the processes stopped meanwhile. */
export async function restoreCopyInProcess(
  record: InProcessRecord,
  from: string,
): Promise<Pick<FilesRestored, 'removed' | 'frozenMs'>> {
  const started = performance.now();
  const thaw = await freezeProcessTree(record.pid, record.startTime);
  try {
    const { removed } = await replaceTreeContents(record.workspace, join(from, WORK));
    return { removed, frozenMs: Math.round(performance.now() - started) };
  } finally {
    thaw();
  }
}
