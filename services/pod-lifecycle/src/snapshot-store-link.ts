import type { Logger } from '@sandstream/telemetry';
import type { PausedFilesStore } from './paused-files.js';

/**
 * The snapshot store (NATS JetStream's object store) as pauses use it. The store itself is the
 * snapshots' (issue 30 §5); until it is merged, none is configured and pauses fail honestly.
 */
export async function openSnapshotStore(
  _env: { NATS_URL?: string | undefined },
  _logger: Logger,
): Promise<PausedFilesStore | undefined> {
  return undefined;
}
