import type { FilesCapture, FilesRestored } from '../backend.js';
import { frozenCapture } from '../snapshot/frozen-capture.js';
import { decodeSnapshot } from '../snapshot/snapshot-codec.js';
import { SnapshotCorruptError } from '../snapshot/snapshot-entry.js';
import { captureTree } from '../snapshot/tree-capture.js';
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
