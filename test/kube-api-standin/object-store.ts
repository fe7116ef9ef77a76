import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { alreadyExists, gone, notFound } from './api-status.js';
import {
  type KubeObject,
  kindNames,
  type ResourceKind,
  type StoreEvent,
  type WatchEventType,
} from './kube-object.js';

/** Watch history kept for resuming from a resourceVersion; older versions answer 410 Gone. */
const DEFAULT_HISTORY_LIMIT = 5000;

/**
 * The stand-in's etcd: objects per kind and namespace, one global resourceVersion counter, and
 * a bounded history of changes that watchers replay from when they resume.
 */
export class ObjectStore {
  private version = 0;
  private readonly objects = new Map<string, KubeObject>();
  private readonly history: StoreEvent[] = [];
  private readonly events = new EventEmitter();

  constructor(private readonly historyLimit = DEFAULT_HISTORY_LIMIT) {
    this.events.setMaxListeners(0);
  }

  private static key(kind: ResourceKind, namespace: string, name: string): string {
    return `${kind}/${namespace}/${name}`;
  }

  get currentVersion(): number {
    return this.version;
  }

  private record(type: WatchEventType, kind: ResourceKind, object: KubeObject): void {
    const event: StoreEvent = { type, kind, resourceVersion: this.version, object: structuredClone(object) };
    this.history.push(event);
    if (this.history.length > this.historyLimit) this.history.shift();
    this.events.emit('event', event);
  }

  create(kind: ResourceKind, namespace: string, body: KubeObject): KubeObject {
    const metadata = body.metadata ?? {};
    const name =
      metadata.name ||
      (metadata.generateName ? `${metadata.generateName}${randomBytes(3).toString('hex').slice(0, 5)}` : '');
    const key = ObjectStore.key(kind, namespace, name);
    if (this.objects.has(key)) throw alreadyExists(kindNames[kind].kind, name);
    this.version++;
    const object: KubeObject = {
      ...structuredClone(body),
      ...kindNames[kind],
      metadata: {
        ...structuredClone(metadata),
        name,
        namespace,
        uid: randomUUID(),
        resourceVersion: String(this.version),
        creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      },
    };
    this.objects.set(key, object);
    this.record('ADDED', kind, object);
    return structuredClone(object);
  }

  get(kind: ResourceKind, namespace: string, name: string): KubeObject {
    const object = this.objects.get(ObjectStore.key(kind, namespace, name));
    if (!object) throw notFound(kindNames[kind].kind, name);
    return structuredClone(object);
  }

  find(kind: ResourceKind, namespace: string, name: string): KubeObject | undefined {
    const object = this.objects.get(ObjectStore.key(kind, namespace, name));
    return object ? structuredClone(object) : undefined;
  }

  list(kind: ResourceKind, namespace: string | undefined): KubeObject[] {
    const prefix = namespace === undefined ? `${kind}/` : `${kind}/${namespace}/`;
    return [...this.objects.entries()]
      .filter(([k]) => k.startsWith(prefix))
      .map(([, o]) => structuredClone(o));
  }

  /** Applies `change` to the stored object; returns the new version, or undefined if it is gone. */
  update(
    kind: ResourceKind,
    namespace: string,
    name: string,
    change: (object: KubeObject) => void,
  ): KubeObject | undefined {
    const key = ObjectStore.key(kind, namespace, name);
    const stored = this.objects.get(key);
    if (!stored) return undefined;
    const next = structuredClone(stored);
    change(next);
    this.version++;
    next.metadata.resourceVersion = String(this.version);
    this.objects.set(key, next);
    this.record('MODIFIED', kind, next);
    return structuredClone(next);
  }

  /** PUT semantics: the body replaces the object; identity (uid, creation time) and a pod's status stay. */
  replace(kind: ResourceKind, namespace: string, name: string, body: KubeObject): KubeObject {
    const updated = this.update(kind, namespace, name, (object) => {
      const { uid, creationTimestamp } = object.metadata;
      const status = object.status;
      for (const k of Object.keys(object)) delete object[k];
      Object.assign(object, structuredClone(body), kindNames[kind]);
      object.metadata = {
        ...structuredClone(body.metadata),
        name,
        namespace,
        uid,
        creationTimestamp,
        resourceVersion: '',
      };
      if (kind === 'pods') object.status = status;
    });
    if (!updated) throw notFound(kindNames[kind].kind, name);
    return updated;
  }

  remove(kind: ResourceKind, namespace: string, name: string): KubeObject | undefined {
    const key = ObjectStore.key(kind, namespace, name);
    const object = this.objects.get(key);
    if (!object) return undefined;
    this.objects.delete(key);
    this.version++;
    object.metadata.resourceVersion = String(this.version);
    this.record('DELETED', kind, object);
    return structuredClone(object);
  }

  /** Changes after `resourceVersion`, for a resuming watcher; 410 Gone when they fell out of the history. */
  since(resourceVersion: number): StoreEvent[] {
    const oldest = this.history[0]?.resourceVersion ?? this.version + 1;
    if (resourceVersion < oldest - 1 && resourceVersion < this.version) {
      throw gone(`too old resource version: ${resourceVersion} (${oldest - 1})`);
    }
    return this.history.filter((e) => e.resourceVersion > resourceVersion);
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.events.on('event', listener);
    return () => this.events.off('event', listener);
  }
}
