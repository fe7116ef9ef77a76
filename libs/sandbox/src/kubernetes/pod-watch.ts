import {
  type CoreV1Api,
  type Informer,
  type KubeConfig,
  makeInformer,
  type ObjectCache,
  type V1Pod,
} from '@kubernetes/client-node';
import { isNotFound } from './kube-api-errors.js';

export interface PodInformerOptions {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  namespace: string;
  /** Only pods with these labels are listed and watched (the backend's own sandboxes). */
  labelSelector?: string;
}

export interface PodListener {
  /** Every snapshot: the state the pod is in when the watch starts, then each change. */
  onPod: (pod: V1Pod) => void;
  /** The pod does not exist (any more). Called at most once; nothing follows it. */
  onGone: () => void;
}

export interface PodWatchHandle {
  stop(): void;
}

const minBackoffMs = 100;
const maxBackoffMs = 2000;

interface Subscription {
  name: string;
  listener: PodListener;
  active: boolean;
  /** Something (a snapshot or the end) was delivered: no read is needed to learn the pod's state. */
  heard: boolean;
  /** The pod delivered last: a late DELETE of an earlier pod of the same name is not its end. */
  uid?: string;
}

/**
 * The backend's pods, followed by ONE informer (the client's own list, watch, resume from the last
 * resourceVersion, and list again after 410 Gone) shared by every wait of the backend, instead of
 * one list and one watch per starting sandbox: the API server holds one watch per backend however
 * many sandboxes start at once. Started by the first watch(), stopped by stop().
 *
 * The informer gives up on an error (a refused watch, a failed list) and leaves the restart to its
 * user: it is restarted here with backoff, resuming from the version it had; the caller's deadline,
 * not this loop, decides when to give up on a pod.
 */
export class PodInformer {
  private informer: (Informer<V1Pod> & ObjectCache<V1Pod>) | undefined;
  private readonly subscriptions = new Map<string, Set<Subscription>>();
  private stopped = false;
  private backoffMs = minBackoffMs;
  private restartTimer: NodeJS.Timeout | undefined;
  private markSynced: () => void = () => {};
  /** Resolves once the first list is in the cache (its ADD events delivered). */
  private readonly synced = new Promise<void>((resolve) => {
    this.markSynced = resolve;
  });

  constructor(private readonly options: PodInformerOptions) {}

  /**
   * Follows one pod by name. A pod missing from the cache may be gone or merely not seen yet (the
   * create's ADDED event still on its way), so only a read of the pod tells them apart; a pod the
   * first list or an event already delivered needs none.
   */
  watch(name: string, listener: PodListener): PodWatchHandle {
    const sub: Subscription = { name, listener, active: true, heard: false };
    const set = this.subscriptions.get(name) ?? new Set<Subscription>();
    this.subscriptions.set(name, set);
    set.add(sub);
    this.ensureStarted();
    // Never synchronously: the caller's handle must exist before its callbacks run.
    const ready = this.stopped ? Promise.resolve() : this.synced;
    void ready.then(() => this.settleInitialState(sub));
    return { stop: () => this.unsubscribe(sub) };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    for (const set of this.subscriptions.values()) for (const sub of set) sub.active = false;
    this.subscriptions.clear();
    await this.informer?.stop();
  }

  private ensureStarted(): void {
    if (this.informer || this.stopped) return;
    const { kubeConfig, core, namespace, labelSelector } = this.options;
    const informer = makeInformer<V1Pod>(
      kubeConfig,
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
      async () => {
        const list = await core.listNamespacedPod({
          namespace,
          ...(labelSelector ? { labelSelector } : {}),
        });
        this.backoffMs = minBackoffMs;
        // The informer fills its cache right after this promise resolves, in the same microtask
        // chain; a macrotask later every ADD of this list has been delivered.
        setImmediate(() => this.markSynced());
        return list;
      },
      labelSelector,
    );
    const deliver = (pod: V1Pod) => {
      this.backoffMs = minBackoffMs;
      const name = pod.metadata?.name;
      if (name) for (const sub of this.subscriptions.get(name) ?? []) this.send(sub, pod);
    };
    informer.on('add', deliver);
    informer.on('update', deliver);
    informer.on('delete', (pod) => {
      const name = pod.metadata?.name;
      if (!name) return;
      for (const sub of this.subscriptions.get(name) ?? []) {
        if (sub.uid === undefined || sub.uid === pod.metadata?.uid) this.sendGone(sub);
      }
    });
    informer.on('error', () => this.restartLater());
    this.informer = informer;
    informer.start().catch(() => this.restartLater());
  }

  private restartLater(): void {
    // Stopping aborts the open watch, which the informer reports as an error: not a reason to restart.
    if (this.stopped || this.restartTimer) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, maxBackoffMs);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (!this.stopped) this.informer?.start().catch(() => this.restartLater());
    }, delay);
  }

  private async settleInitialState(sub: Subscription): Promise<void> {
    let delay = minBackoffMs;
    while (sub.active && !sub.heard) {
      const cached = this.informer?.get(sub.name, this.options.namespace);
      if (cached) return this.send(sub, cached);
      try {
        const pod = await this.options.core.readNamespacedPod({
          name: sub.name,
          namespace: this.options.namespace,
        });
        // An event may have overtaken the read: the cache then holds the newer state.
        if (!sub.heard) this.send(sub, this.informer?.get(sub.name, this.options.namespace) ?? pod);
        return;
      } catch (err) {
        if (isNotFound(err)) return this.sendGone(sub);
        // The API is unreachable for now; the informer's own events may still answer first.
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, maxBackoffMs);
      }
    }
  }

  private send(sub: Subscription, pod: V1Pod): void {
    if (!sub.active) return;
    sub.heard = true;
    sub.uid = pod.metadata?.uid ?? sub.uid;
    sub.listener.onPod(pod);
  }

  private sendGone(sub: Subscription): void {
    if (!sub.active) return;
    sub.heard = true;
    this.unsubscribe(sub);
    sub.listener.onGone();
  }

  private unsubscribe(sub: Subscription): void {
    sub.active = false;
    const set = this.subscriptions.get(sub.name);
    set?.delete(sub);
    if (set?.size === 0) this.subscriptions.delete(sub.name);
  }
}
