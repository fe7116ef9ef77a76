import type { KubeConfig } from '@kubernetes/client-node';
import type { FilesCapture, FilesRestored } from '../backend.js';
import { captureWorkByTar, restoreWorkByTar, type SandboxExec } from '../snapshot/work-tar.js';
import { execInPod } from './pod-exec.js';

export interface PodTarget {
  kubeConfig: KubeConfig;
  namespace: string;
  pod: string;
  container: string;
  /** The work volume's mount point in the container. */
  workdir: string;
}

/** A command in the pod's toolchain container, through `pods/exec`. */
export function podExec(target: PodTarget): SandboxExec {
  return (command, stdin) => execInPod({ ...target, command, ...(stdin ? { stdin } : {}) });
}

/** The work volume as a snapshot stream, read from `tar` run in the pod (snapshot/work-tar.ts). */
export function capturePod(
  target: PodTarget,
  freeze: () => Promise<() => Promise<void>>,
): Promise<FilesCapture> {
  return captureWorkByTar(podExec(target), target.workdir, freeze);
}

/** Makes the pod's work volume exactly the snapshot's `work/` part, streamed as a tar into the pod. */
export function restorePod(
  target: PodTarget,
  snapshot: AsyncIterable<Buffer>,
  freeze: () => Promise<() => Promise<void>>,
): Promise<FilesRestored> {
  return restoreWorkByTar(podExec(target), target.workdir, snapshot, freeze, 'a Kubernetes sandbox');
}
