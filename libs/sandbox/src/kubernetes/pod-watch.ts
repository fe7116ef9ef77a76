import { type CoreV1Api, type KubeConfig, type V1Pod, Watch } from '@kubernetes/client-node';
import { isNotFound } from './kube-api-errors.js';

export interface PodWatchOptions {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  namespace: string;
  name: string;
  /** Every snapshot: the first read, then each change the API server reports. */
  onPod: (pod: V1Pod) => void;
  /** The pod does not exist (any more). */
  onGone: () => void;
}

export interface PodWatchHandle {
  stop(): void;
}

const maxBackoffMs = 2000;

/**
 * Follows one pod by a WATCH on its name. Reads it once first (the state it is in now, and the
 * resourceVersion to watch from), then resumes the watch from the last version seen whenever the
 * server closes it; "410 Gone" (version compacted away) means read again and start over. Errors
 * are retried with backoff: the caller's deadline, not this loop, decides when to give up.
 */
export function watchPod(options: PodWatchOptions): PodWatchHandle {
  const { core, namespace, name } = options;
  const watch = new Watch(options.kubeConfig);
  let stopped = false;
  let resourceVersion: string | undefined;
  let controller: AbortController | undefined;
  let backoffMs = 100;
  let retryTimer: NodeJS.Timeout | undefined;

  const retry = (run: () => Promise<void>, delayMs: number) => {
    if (stopped) return;
    retryTimer = setTimeout(() => void run(), delayMs);
  };

  const readThenWatch = async (): Promise<void> => {
    if (stopped) return;
    try {
      const pod = await core.readNamespacedPod({ name, namespace });
      if (stopped) return;
      resourceVersion = pod.metadata?.resourceVersion;
      options.onPod(pod);
    } catch (err) {
      if (stopped) return;
      if (isNotFound(err)) return options.onGone();
      backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
      return retry(readThenWatch, backoffMs);
    }
    await connect();
  };

  const connect = async (): Promise<void> => {
    if (stopped) return;
    let mustRelist = false;
    controller = await watch.watch(
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
      { fieldSelector: `metadata.name=${name}`, resourceVersion, allowWatchBookmarks: true },
      (type: string, object: unknown) => {
        if (stopped) return;
        if (type === 'ERROR') {
          // A Status object; 410 Gone means our resourceVersion is too old to resume from.
          if ((object as { code?: number } | undefined)?.code === 410) mustRelist = true;
          return;
        }
        const pod = object as V1Pod;
        resourceVersion = pod.metadata?.resourceVersion ?? resourceVersion;
        backoffMs = 100;
        if (type === 'DELETED') options.onGone();
        else if (type === 'ADDED' || type === 'MODIFIED') options.onPod(pod);
      },
      (err: unknown) => {
        if (stopped) return;
        if (mustRelist) {
          resourceVersion = undefined;
          return retry(readThenWatch, 0);
        }
        if (err) {
          backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
          return retry(connect, backoffMs);
        }
        // A normal server-side close (watch timeout): resume from where we were.
        retry(connect, 0);
      },
    );
    if (stopped) controller.abort();
  };

  void readThenWatch();
  return {
    stop() {
      stopped = true;
      if (retryTimer) clearTimeout(retryTimer);
      controller?.abort();
    },
  };
}
