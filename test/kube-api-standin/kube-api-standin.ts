import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type Docker from 'dockerode';
import { ApiStatusError, badRequest, invalid, notFound } from './api-status.js';
import { DockerPodRunner } from './docker-pod-runner.js';
import { startGarbageCollector } from './garbage-collector.js';
import { type KubeObject, kindNames, type ResourceKind } from './kube-object.js';
import { schemaProblem } from './manifest-validation.js';
import { ObjectStore } from './object-store.js';
import { podExecUpgrade } from './pod-exec.js';
import { matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { serveWatch } from './watch-stream.js';

export interface KubeApiStandinOptions {
  docker: Docker;
  /** Labels of the one node pods are scheduled onto. */
  nodeLabels?: Record<string, string>;
  /** Pods a namespace may hold before creation is refused as a ResourceQuota would (403 exceeded quota). */
  podQuota?: number;
  port?: number;
  /** Changes kept for resuming watches (default 5000); a small value lets tests provoke 410 Gone. */
  watchHistory?: number;
}

export interface KubeApiStandin {
  url: string;
  store: ObjectStore;
  runner: DockerPodRunner;
  /** Every request received ("GET /api/v1/...?watch=true&..."), so tests can check how a client talks to the API. */
  requests: string[];
  /** Ends every open watch, as an API server restart or a load balancer timeout would. */
  dropWatches(): void;
  /** While true, watch requests are answered 503 (clients back off and retry). */
  refuseWatches(refuse: boolean): void;
  /** A KubeConfig pointing at the stand-in (plain HTTP, no credentials). */
  kubeConfig(namespace?: string): KubeConfig;
  close(): Promise<void>;
}

interface Route {
  kind: ResourceKind;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
}

const routePattern =
  /^\/(?:api\/v1|apis\/networking\.k8s\.io\/v1)(?:\/namespaces\/([^/]+))?\/(pods|secrets|persistentvolumeclaims|networkpolicies)(?:\/([^/]+))?(?:\/(status|log))?\/?$/;

function parseRoute(pathname: string): Route | undefined {
  const m = routePattern.exec(pathname);
  if (!m) return undefined;
  const kind = m[2] as ResourceKind;
  // NetworkPolicies live under networking.k8s.io, the rest under the core group.
  if ((kind === 'networkpolicies') !== pathname.startsWith('/apis/networking.k8s.io/')) return undefined;
  return {
    kind,
    namespace: m[1] ? decodeURIComponent(m[1]) : undefined,
    name: m[3] ? decodeURIComponent(m[3]) : undefined,
    subresource: m[4],
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw badRequest('the request body is not valid JSON');
  }
}

function sendJson(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

const optionalInt = (value: string | null) => (value === null || value === '' ? undefined : Number(value));

/**
 * A test double of the few Kubernetes API endpoints the sandbox backend calls — pods (create,
 * get, list, watch, delete, status, log, exec), secrets, persistentvolumeclaims and networkpolicies —
 * over plain HTTP without authentication. It is not a Kubernetes: one node, no controllers but the
 * owner-reference part of the garbage collector, no admission beyond schema validation and an
 * optional pod quota, NetworkPolicies stored but not enforced. Pods really run, on the local
 * Docker engine (see DockerPodRunner).
 */
export async function startKubeApiStandin(options: KubeApiStandinOptions): Promise<KubeApiStandin> {
  const store = new ObjectStore(options.watchHistory);
  const runner = new DockerPodRunner({
    docker: options.docker,
    store,
    nodeLabels: {
      'kubernetes.io/hostname': 'standin-node',
      'kubernetes.io/os': 'linux',
      ...options.nodeLabels,
    },
    instanceId: randomBytes(4).toString('hex'),
  });

  const create = (route: Route, body: unknown): KubeObject => {
    const names = kindNames[route.kind];
    if (typeof body !== 'object' || body === null) throw badRequest(`a ${names.kind} object is required`);
    const object = structuredClone(body) as KubeObject;
    object.metadata ??= {} as KubeObject['metadata'];
    const name = object.metadata.name ?? object.metadata.generateName ?? '';
    if (object.metadata.namespace && object.metadata.namespace !== route.namespace) {
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    if (!name)
      throw invalid(names.kind, '', 'metadata.name: Required value: name or generateName is required');
    const problem = schemaProblem(route.kind, { ...object, ...names });
    if (problem) throw invalid(names.kind, name, problem);
    if (route.kind === 'pods' && options.podQuota !== undefined) {
      const used = store.list('pods', route.namespace).filter((p) => !p.metadata.deletionTimestamp).length;
      if (used >= options.podQuota) {
        throw new ApiStatusError(
          403,
          'Forbidden',
          `pods "${name}" is forbidden: exceeded quota: sandbox-pods, requested: pods=1, used: pods=${used}, limited: pods=${options.podQuota}`,
        );
      }
    }
    if (route.kind === 'secrets') {
      // As the API server does: stringData is merged into data (base64) and never stored.
      const data = { ...((object.data as Record<string, string> | undefined) ?? {}) };
      for (const [k, v] of Object.entries((object.stringData as Record<string, string> | undefined) ?? {})) {
        data[k] = Buffer.from(v).toString('base64');
      }
      object.data = data;
      delete object.stringData;
    }
    if (route.kind === 'persistentvolumeclaims') {
      // The stand-in's "provisioner" binds at once.
      const spec =
        (object.spec as { accessModes?: string[]; resources?: { requests?: Record<string, string> } }) ?? {};
      object.status = {
        phase: 'Bound',
        accessModes: spec.accessModes ?? [],
        capacity: spec.resources?.requests ?? {},
      };
    }
    if (route.kind === 'pods') object.status = { phase: 'Pending' };
    const created = store.create(route.kind, route.namespace!, object);
    if (route.kind === 'pods') runner.start(created);
    return created;
  };

  /** DELETE as the API server does it: pods terminate first (containers stop), then disappear. */
  const deleteObject = async (
    kind: ResourceKind,
    namespace: string,
    name: string,
    graceSeconds: number | undefined,
  ): Promise<unknown> => {
    const names = kindNames[kind];
    if (kind !== 'pods') {
      const removed = store.remove(kind, namespace, name);
      if (!removed) throw notFound(names.kind, name);
      if (kind === 'persistentvolumeclaims') await runner.deleteClaimVolume(namespace, name);
      return {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Success',
        details: { name, kind, uid: removed.metadata.uid },
      };
    }
    const pod = store.get('pods', namespace, name);
    if (pod.metadata.deletionTimestamp) return pod;
    const grace =
      graceSeconds ??
      (pod.spec as { terminationGracePeriodSeconds?: number } | undefined)?.terminationGracePeriodSeconds ??
      30;
    const marked = store.update('pods', namespace, name, (object) => {
      object.metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      object.metadata.deletionGracePeriodSeconds = grace;
    });
    // The object stays (terminating) until its containers are gone, then it disappears.
    void runner
      .delete(namespace, name, grace)
      .catch(() => {})
      .then(() => store.remove('pods', namespace, name));
    return marked;
  };
  const stopCollector = startGarbageCollector(store, (kind, namespace, name) =>
    deleteObject(kind, namespace, name, undefined),
  );

  const remove = (route: Route, url: URL, body: unknown): Promise<unknown> => {
    const fromBody = (body as { gracePeriodSeconds?: number } | undefined)?.gracePeriodSeconds;
    const grace = optionalInt(url.searchParams.get('gracePeriodSeconds')) ?? fromBody;
    return deleteObject(route.kind, route.namespace!, route.name!, grace);
  };

  const requests: string[] = [];
  const openWatches = new Set<ServerResponse>();
  let refusingWatches = false;
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://standin');
    requests.push(`${req.method} ${url.pathname}${url.search}`);
    const route = parseRoute(url.pathname);
    if (!route)
      throw new ApiStatusError(
        404,
        'NotFound',
        `the server could not find the requested resource (${req.method} ${url.pathname})`,
      );
    const names = kindNames[route.kind];
    const method = req.method ?? 'GET';
    if (route.name === undefined) {
      if (method === 'POST') {
        if (!route.namespace) throw new ApiStatusError(405, 'MethodNotAllowed', 'create needs a namespace');
        return sendJson(res, 201, create(route, await readJson(req)));
      }
      if (method !== 'GET')
        throw new ApiStatusError(405, 'MethodNotAllowed', `${method} is not supported on a list`);
      const labels = parseLabelSelector(url.searchParams.get('labelSelector'));
      const fields = parseFieldSelector(url.searchParams.get('fieldSelector'));
      const matches = (o: KubeObject) => matchesLabels(o, labels) && fields(o);
      const watch = url.searchParams.get('watch');
      if (watch === '1' || watch === 'true') {
        if (refusingWatches)
          throw new ApiStatusError(503, 'ServiceUnavailable', 'the stand-in is refusing watches');
        openWatches.add(res);
        res.on('close', () => openWatches.delete(res));
        return serveWatch(
          store,
          {
            kind: route.kind,
            namespace: route.namespace,
            matches,
            resourceVersion: optionalInt(url.searchParams.get('resourceVersion')),
            timeoutSeconds: optionalInt(url.searchParams.get('timeoutSeconds')),
          },
          res,
        );
      }
      return sendJson(res, 200, {
        kind: `${names.kind}List`,
        apiVersion: names.apiVersion,
        metadata: { resourceVersion: String(store.currentVersion) },
        items: store.list(route.kind, route.namespace).filter(matches),
      });
    }
    if (!route.namespace) throw new ApiStatusError(404, 'NotFound', 'named objects live in a namespace');
    if (route.subresource === 'log') {
      if (route.kind !== 'pods' || method !== 'GET')
        throw new ApiStatusError(405, 'MethodNotAllowed', 'log is GET on pods');
      store.get('pods', route.namespace, route.name);
      const text = await runner.logs(
        route.namespace,
        route.name,
        url.searchParams.get('container') ?? undefined,
        optionalInt(url.searchParams.get('tailLines')),
        optionalInt(url.searchParams.get('limitBytes')),
      );
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end(text);
      return;
    }
    if (method === 'GET') return sendJson(res, 200, store.get(route.kind, route.namespace, route.name));
    if (method === 'DELETE') return sendJson(res, 200, await remove(route, url, await readJson(req)));
    if (method === 'PUT' && route.subresource === undefined && route.kind !== 'pods') {
      const body = (await readJson(req)) as KubeObject;
      const problem = schemaProblem(route.kind, { ...body, ...names });
      if (problem) throw invalid(names.kind, route.name, problem);
      return sendJson(res, 200, store.replace(route.kind, route.namespace, route.name, body));
    }
    throw new ApiStatusError(
      405,
      'MethodNotAllowed',
      `${method} ${url.pathname} is not supported by the stand-in`,
    );
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const status =
        err instanceof ApiStatusError
          ? err
          : new ApiStatusError(500, 'InternalError', (err as Error).message);
      if (res.headersSent) res.end();
      else sendJson(res, status.code, status.toStatus());
    });
  });
  // pods/exec is a WebSocket upgrade, not a request: served beside the routes above.
  server.on('upgrade', podExecUpgrade({ docker: options.docker, runner }));
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    store,
    runner,
    requests,
    dropWatches() {
      for (const res of openWatches) res.end();
      openWatches.clear();
    },
    refuseWatches(refuse: boolean) {
      refusingWatches = refuse;
    },
    kubeConfig(namespace = 'default') {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'kube-api-standin', server: url, skipTLSVerify: true }],
        users: [{ name: 'kube-api-standin' }],
        contexts: [
          { name: 'kube-api-standin', cluster: 'kube-api-standin', user: 'kube-api-standin', namespace },
        ],
        currentContext: 'kube-api-standin',
      });
      return kc;
    },
    async close() {
      stopCollector();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await runner.close();
    },
  };
}
