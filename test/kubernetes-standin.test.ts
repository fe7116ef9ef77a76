import { randomBytes } from 'node:crypto';
import { CoreV1Api, type V1Pod, Watch } from '@kubernetes/client-node';
import { dockerEngine } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeApiStandin, startKubeApiStandin } from './kube-api-standin/index.js';

const busybox = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
const { docker, skip: engine } = await dockerEngine('kubernetes-standin');
const suffix = () => randomBytes(4).toString('hex');

/** Waits, by watch, for a pod snapshot that satisfies `done`. */
function waitForPod(
  standin: KubeApiStandin,
  namespace: string,
  name: string,
  done: (pod: V1Pod) => boolean,
  timeoutMs = 30_000,
): Promise<V1Pod> {
  return new Promise((resolve, reject) => {
    let controller: AbortController | undefined;
    const timer = setTimeout(() => {
      controller?.abort();
      reject(new Error(`pod ${name} did not reach the expected state in ${timeoutMs} ms`));
    }, timeoutMs);
    void new Watch(standin.kubeConfig())
      .watch(
        `/api/v1/namespaces/${namespace}/pods`,
        { fieldSelector: `metadata.name=${name}` },
        (_type: string, object: unknown) => {
          if (done(object as V1Pod)) {
            clearTimeout(timer);
            controller?.abort();
            resolve(object as V1Pod);
          }
        },
        () => {},
      )
      .then((c) => {
        controller = c;
      });
  });
}

describe.skipIf(engine)('kube-api-standin: the pods it runs on Docker', () => {
  let standin: KubeApiStandin;
  let core: CoreV1Api;
  const namespace = `standin-${suffix()}`;

  beforeAll(async () => {
    standin = await startKubeApiStandin({ docker, nodeLabels: { pool: 'general' }, podQuota: 4 });
    core = standin.kubeConfig().makeApiClient(CoreV1Api);
  });
  afterAll(async () => {
    await standin?.close();
  });

  it('runs init containers first, shares emptyDir volumes, resolves secretKeyRef and $(VAR), and reports exit codes', async () => {
    await core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'creds' }, stringData: { token: 't0ken' } },
    });
    const name = `p-${suffix()}`;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name },
        spec: {
          restartPolicy: 'Never',
          volumes: [{ name: 'shared', emptyDir: {} }],
          initContainers: [
            {
              name: 'first',
              image: busybox,
              command: ['/bin/sh', '-c', 'echo from-init > /shared/file'],
              volumeMounts: [{ name: 'shared', mountPath: '/shared' }],
            },
          ],
          containers: [
            {
              name: 'main',
              image: busybox,
              command: ['/bin/sh', '-c'],
              args: [
                'cat /shared/file; echo "token=$TOKEN greeting=$(GREETING)"; touch /shared/x 2>/dev/null || echo read-only; exit 3',
              ],
              env: [
                { name: 'WHO', value: 'world' },
                { name: 'GREETING', value: 'hello-$(WHO)' },
                { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } },
              ],
              volumeMounts: [{ name: 'shared', mountPath: '/shared', readOnly: true }],
            },
          ],
        },
      },
    });
    const done = await waitForPod(
      standin,
      namespace,
      name,
      (p) => p.status?.phase === 'Failed' || p.status?.phase === 'Succeeded',
    );
    expect(done.status?.phase).toBe('Failed');
    expect(done.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 0,
      reason: 'Completed',
    });
    expect(done.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 3,
      reason: 'Error',
    });
    const status = await core.readNamespacedPodStatus({ name, namespace });
    expect(status.status?.phase).toBe('Failed');
    const log = await core.readNamespacedPodLog({ name, namespace, container: 'main' });
    expect(log).toBe('from-init\ntoken=t0ken greeting=hello-world\nread-only\n');
    const tail = await core.readNamespacedPodLog({ name, namespace, container: 'main', tailLines: 1 });
    expect(tail).toBe('read-only\n');
    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
  });

  it('reports a missing image as ErrImageNeverPull, a missing secret and a root image under runAsNonRoot as CreateContainerConfigError', async () => {
    const missing = `p-${suffix()}`;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: missing },
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image: `sandstream/absent-${suffix()}:x` }],
        },
      },
    });
    const pulled = await waitForPod(
      standin,
      namespace,
      missing,
      (p) => !!p.status?.containerStatuses?.[0]?.state?.waiting?.message,
    );
    expect(pulled.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('ErrImageNeverPull');
    expect(pulled.status?.phase).toBe('Pending');

    const noSecret = `p-${suffix()}`;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: noSecret },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'main',
              image: busybox,
              env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'nope', key: 'k' } } }],
            },
          ],
        },
      },
    });
    const config = await waitForPod(
      standin,
      namespace,
      noSecret,
      (p) => !!p.status?.containerStatuses?.[0]?.state?.waiting?.message,
    );
    expect(config.status?.containerStatuses?.[0]?.state?.waiting).toMatchObject({
      reason: 'CreateContainerConfigError',
      message: 'secret "nope" not found',
    });
    // As the kubelet does: runAsNonRoot without a uid, on an image that runs as root, is refused.
    const rootImage = `p-${suffix()}`;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: rootImage },
        spec: { securityContext: { runAsNonRoot: true }, containers: [{ name: 'main', image: busybox }] },
      },
    });
    const refused = await waitForPod(
      standin,
      namespace,
      rootImage,
      (p) => !!p.status?.containerStatuses?.[0]?.state?.waiting?.message,
    );
    expect(refused.status?.containerStatuses?.[0]?.state?.waiting).toMatchObject({
      reason: 'CreateContainerConfigError',
      message: 'container has runAsNonRoot and image will run as root',
    });
    for (const name of [missing, noSecret, rootImage]) {
      await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
    }
  });

  it('leaves a pod whose nodeSelector matches no node Pending with PodScheduled=False Unschedulable', async () => {
    const name = `p-${suffix()}`;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name },
        spec: { nodeSelector: { pool: 'gpu' }, containers: [{ name: 'main', image: busybox }] },
      },
    });
    const pod = await waitForPod(
      standin,
      namespace,
      name,
      (p) => p.status?.conditions?.some((c) => c.type === 'PodScheduled') ?? false,
    );
    expect(pod.status?.conditions?.find((c) => c.type === 'PodScheduled')).toMatchObject({
      status: 'False',
      reason: 'Unschedulable',
    });
    await core.deleteNamespacedPod({ name, namespace });
  });

  it('refuses invalid pods with 422 and pods over the quota with 403 exceeded quota', async () => {
    const bad = core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: `p-${suffix()}` },
        spec: { containers: [{ name: 'main', image: busybox, imagePullPolicy: 'Sometimes' }] },
      },
    });
    await expect(bad).rejects.toMatchObject({ code: 422 });
    const quotaNs = `quota-${suffix()}`;
    const names: string[] = [];
    for (let i = 0; i < 4; i++) {
      const name = `p-${i}-${suffix()}`;
      names.push(name);
      await core.createNamespacedPod({
        namespace: quotaNs,
        body: {
          metadata: { name },
          spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: busybox, command: ['true'] }] },
        },
      });
    }
    const over = core.createNamespacedPod({
      namespace: quotaNs,
      body: {
        metadata: { name: `p-over-${suffix()}` },
        spec: { containers: [{ name: 'main', image: busybox }] },
      },
    });
    await expect(over).rejects.toMatchObject({ code: 403 });
    await expect(over).rejects.toThrow(/exceeded quota/);
    for (const name of names)
      await core.deleteNamespacedPod({ name, namespace: quotaNs, gracePeriodSeconds: 0 });
  });

  it('lists by label selector, and a watch resumes after a resourceVersion', async () => {
    const name = `p-${suffix()}`;
    const created = await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name, labels: { app: 'listed', tier: 'x' } },
        spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: busybox, command: ['true'] }] },
      },
    });
    const listed = await core.listNamespacedPod({ namespace, labelSelector: 'app=listed,tier in (x,y)' });
    expect(listed.items.map((p) => p.metadata?.name)).toEqual([name]);
    expect(
      (await core.listNamespacedPod({ namespace, labelSelector: 'app!=listed' })).items.map(
        (p) => p.metadata?.name,
      ),
    ).not.toContain(name);

    const seen: string[] = [];
    let finished: () => void = () => {};
    const done = new Promise<void>((r) => {
      finished = r;
    });
    await new Promise<void>((resolve, reject) => {
      void new Watch(standin.kubeConfig())
        .watch(
          `/api/v1/namespaces/${namespace}/pods`,
          { fieldSelector: `metadata.name=${name}`, resourceVersion: created.metadata?.resourceVersion },
          (type: string, object: unknown) => {
            seen.push(`${type}:${(object as V1Pod).status?.phase}`);
            if ((object as V1Pod).status?.phase === 'Succeeded') {
              finished();
              resolve();
            }
          },
          (err: unknown) => (err ? reject(err) : undefined),
        )
        .then((controller) => {
          // Stop watching once the pod finished.
          void done.then(() => controller.abort());
        });
    });
    // Only changes after the creation's version: no synthetic ADDED, then the pod's progress.
    expect(seen[0]).toMatch(/^MODIFIED:/);
    expect(seen.at(-1)).toBe('MODIFIED:Succeeded');

    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
  });

  it('answers a watch from a version that fell out of its history with an ERROR event carrying 410', async () => {
    const small = await startKubeApiStandin({ docker, watchHistory: 3 });
    try {
      const smallCore = small.kubeConfig().makeApiClient(CoreV1Api);
      for (let i = 0; i < 5; i++) {
        await smallCore.createNamespacedSecret({
          namespace,
          body: { metadata: { name: `s-${i}` }, stringData: { k: 'v' } },
        });
      }
      const events: Array<{ type: string; code?: number }> = [];
      await new Promise<void>((resolve) => {
        void new Watch(small.kubeConfig()).watch(
          `/api/v1/namespaces/${namespace}/pods`,
          { resourceVersion: '1' },
          (type: string, object: unknown) => events.push({ type, code: (object as { code?: number }).code }),
          () => resolve(),
        );
      });
      expect(events).toEqual([{ type: 'ERROR', code: 410 }]);
    } finally {
      await small.close();
    }
  });
});
