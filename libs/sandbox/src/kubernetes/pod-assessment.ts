import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { SandboxStartFailure } from '../backend.js';
import { TOOLCHAIN_CONTAINER } from './pod-builder.js';

export type PodAssessment =
  | { state: 'pending'; detail: string }
  | { state: 'running' }
  | {
      state: 'failed';
      reason: SandboxStartFailure;
      message: string;
      /** Set when the container's log tail would explain the failure. */
      logContainer?: string;
    };

const neverPresent = new Set(['ErrImageNeverPull', 'InvalidImageName']);
const pullFailures = new Set(['ErrImagePull', 'ImagePullBackOff']);
const configFailures = new Set(['CreateContainerConfigError', 'CreateContainerError', 'RunContainerError']);
/** Registries say "not found" in many ways; these mean the name or tag is wrong, not the network. */
const notFoundPattern = /not found|manifest unknown|does not exist|no such image|name unknown/i;

function imageOf(pod: V1Pod, container: string): string {
  const all = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  return all.find((c) => c.name === container)?.image ?? '(unknown image)';
}

function waitingFailure(pod: V1Pod, status: V1ContainerStatus): PodAssessment | undefined {
  const waiting = status.state?.waiting;
  if (!waiting?.reason) return undefined;
  const image = imageOf(pod, status.name);
  const detail = waiting.message ? `: ${waiting.message}` : '';
  if (neverPresent.has(waiting.reason)) {
    return {
      state: 'failed',
      reason: 'image_not_found',
      message: `container ${status.name}: image "${image}" is not available on the node (${waiting.reason}${detail}). Check the image name and tag, or load the image onto the nodes.`,
    };
  }
  if (pullFailures.has(waiting.reason)) {
    const notFound = notFoundPattern.test(waiting.message ?? '');
    return {
      state: 'failed',
      reason: notFound ? 'image_not_found' : 'image_pull',
      message: notFound
        ? `container ${status.name}: image "${image}" does not exist in its registry (${waiting.reason}${detail}). Check the image name and tag.`
        : `container ${status.name}: image "${image}" cannot be pulled (${waiting.reason}${detail}). Check registry credentials (imagePullSecrets) and that the nodes can reach the registry.`,
    };
  }
  if (configFailures.has(waiting.reason)) {
    return {
      state: 'failed',
      reason: 'backend_error',
      message: `container ${status.name} cannot be created (${waiting.reason}${detail}). A secretEnv entry may name a Secret or key that does not exist.`,
    };
  }
  if (waiting.reason === 'CrashLoopBackOff') {
    return {
      state: 'failed',
      reason: 'agent_crashed',
      message: `container ${status.name} keeps crashing (CrashLoopBackOff${detail})`,
      logContainer: status.name,
    };
  }
  return undefined;
}

function terminatedFailure(status: V1ContainerStatus, isInit: boolean): PodAssessment | undefined {
  const terminated = status.state?.terminated ?? status.lastState?.terminated;
  if (!terminated) return undefined;
  // An init container that finished with 0 did its job; anything else ends the start.
  if (isInit && terminated.exitCode === 0) return undefined;
  const why = [terminated.reason, terminated.message].filter(Boolean).join(': ');
  const what = status.name === TOOLCHAIN_CONTAINER ? 'the agent' : `container ${status.name}`;
  return {
    state: 'failed',
    reason: 'agent_crashed',
    message: `${what} exited (exit code ${terminated.exitCode}${why ? `, ${why}` : ''}) before the sandbox became ready`,
    logContainer: status.name,
  };
}

/** Sidecars (init containers with restartPolicy Always) keep running; they are not start steps. */
function isSidecar(pod: V1Pod, name: string): boolean {
  return pod.spec?.initContainers?.find((c) => c.name === name)?.restartPolicy === 'Always';
}

function pendingDetail(pod: V1Pod): string {
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  const waiting = statuses.find((s) => s.state?.waiting?.reason)?.state?.waiting?.reason;
  return `pod phase ${pod.status?.phase ?? 'unknown'}${waiting ? `, ${waiting}` : ''}`;
}

/**
 * Reads one pod snapshot and says whether the sandbox runs, is still starting, or has failed in
 * a way no amount of waiting fixes (wrong image, crashed agent, no node fits, bad config).
 */
export function assessPod(pod: V1Pod): PodAssessment {
  if (pod.metadata?.deletionTimestamp) {
    return { state: 'failed', reason: 'backend_error', message: 'the pod is being deleted' };
  }
  for (const status of pod.status?.initContainerStatuses ?? []) {
    const failure =
      waitingFailure(pod, status) ??
      (isSidecar(pod, status.name) ? undefined : terminatedFailure(status, true));
    if (failure) return failure;
  }
  for (const status of pod.status?.containerStatuses ?? []) {
    const failure = waitingFailure(pod, status) ?? terminatedFailure(status, false);
    if (failure) return failure;
  }
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded') {
    const why = [pod.status?.reason, pod.status?.message].filter(Boolean).join(': ');
    return {
      state: 'failed',
      reason: pod.status?.reason === 'Evicted' ? 'backend_error' : 'agent_crashed',
      message: `the pod ended (phase ${phase}${why ? `, ${why}` : ''}) before the sandbox became ready`,
      logContainer: TOOLCHAIN_CONTAINER,
    };
  }
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    return {
      state: 'failed',
      reason: 'unschedulable',
      message: `no node can run the sandbox: ${scheduled.message ?? 'Unschedulable'}. Check nodeSelector, tolerations, runtimeClass and resource requests.`,
    };
  }
  const toolchain = pod.status?.containerStatuses?.find((s) => s.name === TOOLCHAIN_CONTAINER);
  if (phase === 'Running' && toolchain?.state?.running) return { state: 'running' };
  return { state: 'pending', detail: pendingDetail(pod) };
}
