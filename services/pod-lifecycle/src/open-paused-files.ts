import type { PausedFilesStore } from '@sandstream/bus';
import type { SandboxBackend } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import type { CaptureCache } from './capture-cache.js';
import { PausedFiles } from './paused-files.js';
import type { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';

/**
 * The files keeper of this pod-lifecycle: the backend's capture joined to the snapshot store, or
 * none (a pause then fails its sandbox, saying so) when no store is configured.
 */
export function openPausedFiles(
  backend: SandboxBackend,
  freeze: SnapshotFreezeGuard,
  store: PausedFilesStore | undefined,
  logger: Logger,
  /** This replica's capture cache: a resume here restores from the pause's spool. */
  cache?: CaptureCache | undefined,
): PausedFiles | undefined {
  if (!store) {
    logger.warn('no snapshot store configured (NATS_URL): a sandbox asked to pause will fail instead');
    return undefined;
  }
  return new PausedFiles(backend, freeze, store, cache, (reason) =>
    logger.warn({ reason }, 'cached pause capture not used'),
  );
}
