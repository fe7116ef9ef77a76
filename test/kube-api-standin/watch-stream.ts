import type { ServerResponse } from 'node:http';
import { ApiStatusError } from './api-status.js';
import type { KubeObject, ResourceKind, StoreEvent } from './kube-object.js';
import type { ObjectStore } from './object-store.js';

export interface WatchRequest {
  kind: ResourceKind;
  namespace: string | undefined;
  matches: (object: KubeObject) => boolean;
  /** Resume after this version; undefined or 0 starts with the current objects as ADDED. */
  resourceVersion: number | undefined;
  timeoutSeconds: number | undefined;
}

/**
 * A watch as the API server streams it: one JSON event per line ({type, object}), kept open,
 * ending after timeoutSeconds (the client then resumes from the last resourceVersion it saw). A
 * version too old to replay becomes an ERROR event carrying a 410 Status, as on a real server.
 */
export function serveWatch(store: ObjectStore, request: WatchRequest, res: ServerResponse): void {
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  res.flushHeaders();
  const send = (type: string, object: unknown) => res.write(`${JSON.stringify({ type, object })}\n`);
  const relevant = (event: StoreEvent) =>
    event.kind === request.kind &&
    (request.namespace === undefined || event.object.metadata.namespace === request.namespace) &&
    request.matches(event.object);

  if (request.resourceVersion === undefined || request.resourceVersion === 0) {
    for (const object of store.list(request.kind, request.namespace))
      if (request.matches(object)) send('ADDED', object);
  } else {
    let backlog: StoreEvent[];
    try {
      backlog = store.since(request.resourceVersion);
    } catch (err) {
      if (!(err instanceof ApiStatusError)) throw err;
      send('ERROR', err.toStatus());
      res.end();
      return;
    }
    for (const event of backlog) if (relevant(event)) send(event.type, event.object);
  }

  const unsubscribe = store.subscribe((event) => {
    if (relevant(event)) send(event.type, event.object);
  });
  const timer = request.timeoutSeconds
    ? setTimeout(() => res.end(), request.timeoutSeconds * 1000)
    : undefined;
  const stop = () => {
    unsubscribe();
    if (timer) clearTimeout(timer);
  };
  res.on('close', stop);
  res.on('finish', stop);
}
