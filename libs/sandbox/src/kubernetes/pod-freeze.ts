import { freezeByExec, thawByExec } from '../snapshot/signal-tree.js';
import { type PodTarget, podExec } from './kubernetes-snapshot.js';

/**
 * Kubernetes has no pause of a pod: the sandbox's processes below the agent get SIGSTOP through
 * `pods/exec` (snapshot/signal-tree.ts), as in-process.
 */
export function freezePod(target: PodTarget): Promise<() => Promise<void>> {
  return freezeByExec(podExec(target));
}

/** SIGCONT to every process below the agent: idempotent, and harmless to a sandbox not frozen. */
export function thawPod(target: PodTarget): Promise<void> {
  return thawByExec(podExec(target));
}
