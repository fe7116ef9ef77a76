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
 * Follows one pod by a WATCH on its name. Lists it once first (the state it is in now, and the
 * resourceVersion to watch from), then resumes the watch from the last version seen whenever the
 * server closes it; "410 Gone" (version compacted away) means list again and start over. Errors
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
      // A list, not a get: the list's resourceVersion is the collection's current one, which a
      // watch can always resume from; the pod's own version may already be compacted away.
      const list = await core.listNamespacedPod({ namespace, fieldSelector: `metadata.name=${name}` });
      if (stopped) return;
      resourceVersion = list.metadata?.resourceVersion;
      const pod = list.items[0];
      if (!pod) return options.onGone();
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
    try {
      controller = await openWatch({ relist: false });
    } catch {
      // Building the request failed (credentials, config): same backoff as a failed connection.
      backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
      return retry(connect, backoffMs);
    }
    if (stopped) controller.abort();
  };

  /** One watch connection; `session.relist` is set when the server says our version is gone. */
  const openWatch = (session: { relist: boolean }) =>
    watch.watch(
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
      { fieldSelector: `metadata.name=${name}`, resourceVersion, allowWatchBookmarks: true },
      (type: string, object: unknown) => {
        if (stopped) return;
        if (type === 'ERROR') {
          // A Status object; 410 Gone means our resourceVersion is too old to resume from.
          if ((object as { code?: number } | undefined)?.code === 410) session.relist = true;
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
        if (session.relist) {
          resourceVersion = undefined;
          backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
          return retry(readThenWatch, backoffMs);
        }
        if (err) {
          backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
          return retry(connect, backoffMs);
        }
        // A normal server-side close (watch timeout): resume from where we were. The short pause
        // keeps a server that closes at once from turning this into a busy loop.
        retry(connect, 50);
      },
    );

  void readThenWatch();
  return {
    stop() {
      stopped = true;
      if (retryTimer) clearTimeout(retryTimer);
      controller?.abort();
    },
  };
}
