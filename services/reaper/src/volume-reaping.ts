import type { VolumeStore } from '@sandstream/bus';
import type { SandboxBackend } from '@sandstream/sandbox';

/**
 * The reaper's volume pass: holds whose sandbox has ended or never came are given back (a
 * pod-lifecycle killed before its teardown, a submit that died after taking them), and the
 * backend objects of deleted volumes are removed (the SDK that deleted the record has no backend).
 */
export async function reapVolumes(
  volumes: VolumeStore,
  backend: SandboxBackend | undefined,
  onError: (err: unknown, source: string) => void = () => {},
): Promise<{ holdsCleared: number; volumesRemoved: number }> {
  const holdsCleared = await volumes.clearStaleHolds();
  let volumesRemoved = 0;
  if (backend?.removeVolume) {
    for (const source of await volumes.deletedBackendNames()) {
      try {
        await backend.removeVolume(source);
      } catch (err) {
        // Still mounted by a sandbox being torn down (an engine's "volume is in use"), or the
        // backend did not answer: kept for the next round, the others go on.
        onError(err, source);
        continue;
      }
      await volumes.forgetDeleted(source);
      volumesRemoved++;
    }
  }
  return { holdsCleared, volumesRemoved };
}
