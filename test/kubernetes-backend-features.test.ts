import { randomBytes } from 'node:crypto';
import { CoreV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import { StepChannel } from '@sandstream/sandbox/testing';
import {
  destroyTestSandbox,
  dockerEngine,
  type RedisServer,
  startRedisServer,
  testRedisUrl,
} from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateSandboxRequest, SandboxBackend, SandboxRef } from '../libs/sandbox/src/backend.js';
import { SandboxStartError } from '../libs/sandbox/src/backend.js';
import {
  createKubernetesBackend,
  type KubernetesBackendOptions,
  sandboxPodName,
} from '../libs/sandbox/src/kubernetes/index.js';
import { MANAGED_SELECTOR } from '../libs/sandbox/src/kubernetes/sandbox-metadata.js';
import { type SandboxSpecInput, SandboxSpecSchema } from '../libs/sandbox/src/sandbox-spec.js';
import { type KubeApiStandin, startKubeApiStandin } from './kube-api-standin/index.js';
import { images, kubernetesLeftovers } from './kubernetes-test-env.js';

/**
 * What only the Kubernetes backend does, driven through the real client against the stand-in:
 * failure classes (unschedulable, quota, a missing carrier), deny-egress NetworkPolicies,
 * per-sandbox Redis URL Secrets, secretEnv from Secrets, operator pod templates (seeds/002),
 * watch-based readiness.
 */
const redisUrl = testRedisUrl();
const { docker, skip } = await dockerEngine('kubernetes-backend-features');
const suffix = () => randomBytes(4).toString('hex');

describe.skipIf(skip)('Kubernetes backend against kube-api-standin', () => {
  const namespace = `k8s-${suffix()}`;
  let standin: KubeApiStandin;
  let core: CoreV1Api;
  let networking: NetworkingV1Api;
  let redis: Redis;
  let blocking: Redis;
  const backends: SandboxBackend[] = [];
  const refs: Array<{ backend: SandboxBackend; ref: SandboxRef }> = [];

  const backendWith = (options: Partial<KubernetesBackendOptions> = {}, client = redis) => {
    const backend = createKubernetesBackend({
      // The shared test Redis has an open `default` user; the guard is tested in open-redis.test.ts.
      allowOpenRedis: true,
      kubeConfig: standin.kubeConfig(namespace),
      namespace,
      agentCarrierImage: images.carrier,
      redis: client,
      terminationGraceSeconds: 2,
      heartbeatPollMs: 100,
      ...options,
    });
    backends.push(backend);
    return backend;
  };
  const request = (
    jobId: string,
    spec: Partial<SandboxSpecInput> = {},
    url = redisUrl,
  ): CreateSandboxRequest => ({
    jobId,
    tenant: 'tenant-a',
    spec: SandboxSpecSchema.parse({ image: images.busybox, ...spec }),
    agent: { redisUrl: url, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
  });
  const alive = (client: Redis, jobId: string) => async () =>
    (await client.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1;
  const start = async (backend: SandboxBackend, req: CreateSandboxRequest, client = redis) => {
    const ref = await backend.create(req);
    refs.push({ backend, ref });
    await backend.waitReady(ref, 30_000, { isAgentAlive: alive(client, req.jobId) });
    return ref;
  };
  const startFailure = async (
    backend: SandboxBackend,
    req: CreateSandboxRequest,
  ): Promise<SandboxStartError> => {
    try {
      const ref = await backend.create(req);
      refs.push({ backend, ref });
      await backend.waitReady(ref, 30_000, { isAgentAlive: alive(redis, req.jobId) });
    } catch (err) {
      expect(err).toBeInstanceOf(SandboxStartError);
      return err as SandboxStartError;
    }
    throw new Error(`${req.jobId} became ready although it should have failed`);
  };

  beforeAll(async () => {
    standin = await startKubeApiStandin({ docker, nodeLabels: { 'sandstream.dev/pool': 'sandboxes' } });
    core = standin.kubeConfig(namespace).makeApiClient(CoreV1Api);
    networking = standin.kubeConfig(namespace).makeApiClient(NetworkingV1Api);
    redis = new Redis(redisUrl);
    blocking = redis.duplicate();
  });

  afterAll(async () => {
    for (const { backend, ref } of refs) await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
    for (const backend of backends) await backend.close();
    await standin?.close();
    blocking?.disconnect();
    redis?.disconnect();
  });

  it('waits for readiness with a WATCH, not by polling the pod (one existence read, one list)', async () => {
    const backend = backendWith();
    const jobId = `watch-${suffix()}`;
    const podPath = `/api/v1/namespaces/${namespace}/pods`;
    const before = standin.requests.length;
    const started = Date.now();
    const ref = await start(backend, request(jobId));
    const readyMs = Date.now() - started;
    const during = standin.requests.slice(before);
    const reads = during.filter(
      (r) =>
        r.startsWith(`GET ${podPath}/${ref.id}`) ||
        (r.startsWith(`GET ${podPath}?`) && !r.includes('watch=')),
    );
    const watches = during.filter((r) => r.startsWith(`GET ${podPath}?`) && r.includes('watch=true'));
    // Two reads, no polling: the create's look for an earlier attempt's pod (a retried create
    // replaces it), then a fresh backend's informer's first list, which finds the new pod.
    expect(reads).toHaveLength(2);
    expect(reads[0]).toMatch(new RegExp(`^GET ${podPath}/${ref.id}`));
    expect(watches).toHaveLength(1);
    expect(watches[0]).toContain(`labelSelector=${encodeURIComponent(MANAGED_SELECTOR)}`);
    console.log(`[measure] kubernetes (stand-in) create -> ready: ${readyMs} ms`);

    const destroyStarted = Date.now();
    await destroyTestSandbox(redis, backend, ref, 3000);
    console.log(
      `[measure] kubernetes (stand-in) destroy (shutdown step, exit, delete, gone): ${Date.now() - destroyStarted} ms`,
    );
    expect(await kubernetesLeftovers(standin, docker, namespace, jobId)).toEqual([]);
  });

  it('create is idempotent for the same job: a retry finds the pod it already made', async () => {
    const backend = backendWith();
    const req = request(`again-${suffix()}`);
    const first = await backend.create(req);
    refs.push({ backend, ref: first });
    const second = await backend.create(req);
    expect(second).toEqual(first);
    await destroyTestSandbox(redis, backend, first, 0);
  });

  it('a nodeSelector no node has fails fast with unschedulable (a capacity error)', async () => {
    const backend = backendWith();
    const started = Date.now();
    const error = await startFailure(
      backend,
      request(`nosched-${suffix()}`, { nodeSelector: { 'sandstream.dev/pool': 'gpu' } }),
    );
    expect(error.reason).toBe('unschedulable');
    expect(error.capacity).toBe(true);
    expect(error.message).toMatch(/didn't match Pod's node affinity\/selector/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('refuses to create a pod while its Redis has an open default user, naming the fix and the override', async () => {
    // The shared test Redis answers PING without credentials: exactly the case refused.
    const backend = backendWith({ allowOpenRedis: false });
    const jobId = `open-${suffix()}`;
    const error = await backend.create(request(jobId)).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as Error).message).toMatch(/open "default" user.*SANDSTREAM_ALLOW_OPEN_REDIS=1/);
    const pods = await core.listNamespacedPod({ namespace });
    expect(pods.items.map((p) => p.metadata?.name).filter((n) => n?.includes(jobId))).toEqual([]);
  });

  it('a namespace out of pod quota refuses creation with quota (403 exceeded quota)', async () => {
    const full = await startKubeApiStandin({ docker, podQuota: 0 });
    try {
      const backend = createKubernetesBackend({
        // The shared test Redis has an open `default` user; the guard is tested in open-redis.test.ts.
        allowOpenRedis: true,
        kubeConfig: full.kubeConfig(namespace),
        namespace,
        agentCarrierImage: images.carrier,
      });
      const error = await backend.create(request(`quota-${suffix()}`)).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(SandboxStartError);
      expect((error as SandboxStartError).reason).toBe('quota');
      expect((error as SandboxStartError).capacity).toBe(true);
      expect((error as SandboxStartError).message).toMatch(/exceeded quota/);
      await backend.close();
    } finally {
      await full.close();
    }
  });

  it('a missing agent carrier image fails fast with image_not_found naming the init container', async () => {
    const carrier = `sandstream/no-such-carrier-${suffix()}:dev`;
    const backend = backendWith({ agentCarrierImage: carrier });
    const error = await startFailure(backend, request(`nocarrier-${suffix()}`));
    expect(error.reason).toBe('image_not_found');
    expect(error.message).toContain('inject-agent');
    expect(error.message).toContain(carrier);
  });

  it('deny-egress creates a NetworkPolicy (Redis only: its URL names an IP) before the pod and deletes it with the pod', async () => {
    const backend = backendWith();
    const jobId = `egress-${suffix()}`;
    const before = standin.requests.length;
    const ref = await start(backend, request(jobId, { network: 'deny-egress' }));
    const policy = await networking.readNamespacedNetworkPolicy({ name: `${ref.id}-egress`, namespace });
    const sent = standin.requests.slice(before);
    const policyPosted = sent.indexOf(
      `POST /apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`,
    );
    const podPosted = sent.indexOf(`POST /api/v1/namespaces/${namespace}/pods`);
    expect(policyPosted).toBeGreaterThan(-1);
    expect(podPosted).toBeGreaterThan(policyPosted);
    expect(policy.spec?.podSelector?.matchLabels).toEqual({ 'sandstream.dev/sandbox': ref.id });
    expect(policy.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec?.egress).toEqual([
      { to: [{ ipBlock: { cidr: '127.0.0.1/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] },
    ]);
    await destroyTestSandbox(redis, backend, ref, 3000);
    await expect(
      networking.readNamespacedNetworkPolicy({ name: `${ref.id}-egress`, namespace }),
    ).rejects.toMatchObject({ code: 404 });
  });

  it('secretEnv reaches the sandbox from a Kubernetes Secret, and never appears in the pod spec', async () => {
    const secretName = `app-${suffix()}`;
    const value = `tok-${suffix()}`;
    await core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: secretName }, stringData: { token: value } },
    });
    const backend = backendWith();
    const jobId = `secret-${suffix()}`;
    const ref = await start(
      backend,
      request(jobId, { secretEnv: { APP_TOKEN: { secretName, key: 'token' } } }),
    );
    const pod = await core.readNamespacedPod({ name: ref.id, namespace });
    expect(JSON.stringify(pod)).not.toContain(value);
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    const result = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'env',
      kind: 'run',
      shell: true,
      command: 'echo "token=$APP_TOKEN"',
    });
    expect(result.exitCode).toBe(0);
    expect(await steps.stdout('env')).toEqual([`token=${value}`]);
    await destroyTestSandbox(redis, backend, ref, 3000);
  });

  describe('with a password-protected Redis', () => {
    let server: RedisServer | undefined;
    let url: string;
    let authed: Redis;
    const password = `pw-${suffix()}`;

    beforeAll(async () => {
      server = await startRedisServer({ args: ['--requirepass', password] });
      url = `redis://:${password}@127.0.0.1:${server.port}`;
      authed = new Redis(url, { lazyConnect: true, retryStrategy: (n) => (n > 50 ? null : 100) });
      authed.on('error', () => {});
      await authed.connect();
    });
    afterAll(async () => {
      authed?.disconnect();
      await server?.stop();
    });

    it('puts a Redis URL with a password into a per-sandbox Secret, not into the pod, and deletes it on destroy', async () => {
      const backend = backendWith({}, authed);
      const jobId = `redispw-${suffix()}`;
      const req = request(jobId, {}, url);
      const ref = await start(backend, req, authed);
      const pod = await core.readNamespacedPod({ name: ref.id, namespace });
      expect(JSON.stringify(pod)).not.toContain(password);
      const env = pod.spec?.containers
        .find((c) => c.name === 'toolchain')
        ?.env?.find((e) => e.name === 'REDIS_URL');
      expect(env?.valueFrom?.secretKeyRef).toEqual({ name: `${ref.id}-redis`, key: 'url' });
      const secret = await core.readNamespacedSecret({ name: `${ref.id}-redis`, namespace });
      expect(Buffer.from(secret.data?.url ?? '', 'base64').toString()).toBe(url);
      await destroyTestSandbox(authed, backend, ref, 3000);
      await expect(core.readNamespacedSecret({ name: `${ref.id}-redis`, namespace })).rejects.toMatchObject({
        code: 404,
      });
    });
  });

  it('merges an operator pod template (seeds/002: sidecar, extra volume, node scheduling, env) into the running pod', async () => {
    const backend = backendWith({
      // Operator-wide: every sandbox lands on the sandbox pool and carries a data volume.
      podTemplate: {
        spec: {
          nodeSelector: { 'sandstream.dev/pool': 'sandboxes' },
          tolerations: [
            { key: 'sandstream.dev/pool', operator: 'Equal', value: 'sandboxes', effect: 'NoSchedule' },
          ],
          volumes: [{ name: 'sb-data', emptyDir: {} }],
          containers: [{ name: 'toolchain', volumeMounts: [{ name: 'sb-data', mountPath: '/data' }] }],
        },
      },
    });
    const jobId = `template-${suffix()}`;
    const ref = await start(
      backend,
      request(jobId, {
        // The job template's own: a sidecar writing into the shared data volume, and an env var.
        podTemplate: {
          spec: {
            initContainers: [
              {
                name: 'sidecar',
                image: images.busybox,
                restartPolicy: 'Always',
                command: ['/bin/sh', '-c', 'echo from-sidecar > /data/sidecar.txt; exec sleep 3600'],
                volumeMounts: [{ name: 'sb-data', mountPath: '/data' }],
              },
            ],
            containers: [{ name: 'toolchain', env: [{ name: 'FROM_TEMPLATE', value: 'yes' }] }],
          },
        },
      }),
    );
    const pod = await core.readNamespacedPod({ name: ref.id, namespace });
    expect(pod.spec?.initContainers?.map((c) => c.name)).toEqual(['inject-agent', 'sidecar']);
    expect(
      pod.status?.initContainerStatuses?.find((s) => s.name === 'sidecar')?.state?.running,
    ).toBeDefined();
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    const result = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'look',
      kind: 'run',
      shell: true,
      command: 'echo "env=$FROM_TEMPLATE"; cat /data/sidecar.txt',
    });
    expect(result.exitCode).toBe(0);
    expect(await steps.stdout('look')).toEqual(['env=yes', 'from-sidecar']);
    await destroyTestSandbox(redis, backend, ref, 3000);
    expect(await kubernetesLeftovers(standin, docker, namespace, jobId)).toEqual([]);
  });

  it('list() reports the exact job id and tenant even when they are not valid label values', async () => {
    const backend = backendWith();
    const jobId = `Job:${suffix()}:${'x'.repeat(70)}`;
    const ref = await backend.create({ ...request(jobId), tenant: 'Tenant With Spaces' });
    refs.push({ backend, ref });
    expect(ref.id).toBe(sandboxPodName(jobId));
    const listed = (await backend.list()).find((s) => s.id === ref.id);
    expect(listed).toMatchObject({ jobId, tenant: 'Tenant With Spaces', backend: 'kubernetes' });
    expect(listed?.labels['sandstream.dev/job-id']).toMatch(/^[a-z0-9][-a-z0-9_.]*[a-z0-9]$/);
    await destroyTestSandbox(redis, backend, ref, 0);
    expect((await backend.list()).find((s) => s.id === ref.id)).toBeUndefined();
  });

  it('close() ends a wait in progress at once instead of leaving it to its deadline', async () => {
    const backend = backendWith();
    const jobId = `close-${suffix()}`;
    const ref = await backend.create(request(jobId, { command: ['/bin/sh', '-c', 'sleep 300'] }));
    refs.push({ backend: backendWith(), ref });
    const watchesBefore = standin.requests.filter((r) => r.includes('watch=true')).length;
    const waiting = backend.waitReady(ref, 60_000, { isAgentAlive: alive(redis, jobId) });
    // In progress for real: the backend's watch is open.
    await expect
      .poll(() => standin.requests.filter((r) => r.includes('watch=true')).length, { timeout: 10_000 })
      .toBeGreaterThan(watchesBefore);
    const closed = Date.now();
    await backend.close();
    await expect(waiting).rejects.toThrow(/backend was closed/);
    // Left to its deadline the wait would take 60 s.
    expect(Date.now() - closed).toBeLessThan(10_000);
  });

  it('with an owner, the garbage collector deletes the sandbox pod, its policy and its secret when the service pod goes', async () => {
    // The "service pod" the sandboxes belong to (downward API POD_NAME / POD_UID in production).
    const serviceName = `svc-${suffix()}`;
    const service = await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: serviceName },
        spec: { containers: [{ name: 'svc', image: images.busybox, command: ['sleep', '600'] }] },
      },
    });
    const owner = { name: serviceName, uid: service.metadata!.uid!, namespace };
    const backend = backendWith({ owner, redisUrlSource: 'per-sandbox' });
    const jobId = `owned-${suffix()}`;
    const ref = await start(backend, request(jobId, { network: 'deny-egress' }));
    const pod = await core.readNamespacedPod({ name: ref.id, namespace });
    expect(pod.metadata?.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Pod', name: serviceName, uid: owner.uid, controller: false },
    ]);
    expect(await kubernetesLeftovers(standin, docker, namespace, jobId)).toEqual(
      expect.arrayContaining([`pod ${ref.id}`, `secret ${ref.id}-redis`, `networkpolicy ${ref.id}-egress`]),
    );

    // The service pod is gone (crash, eviction): nobody calls destroy, yet nothing is left.
    await core.deleteNamespacedPod({ name: serviceName, namespace, gracePeriodSeconds: 0 });
    await expect
      .poll(() => kubernetesLeftovers(standin, docker, namespace, jobId), { timeout: 30_000, interval: 200 })
      .toEqual([]);
  });

  it('starts several sandboxes at once, all followed by one shared watch', async () => {
    const backend = backendWith();
    const count = 6;
    const podPath = `/api/v1/namespaces/${namespace}/pods`;
    const before = standin.requests.length;
    const started = Date.now();
    const timings = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const t0 = Date.now();
        const ref = await start(backend, request(`many-${i}-${suffix()}`));
        const ms = Date.now() - t0;
        return { ref, ms };
      }),
    );
    const wall = Date.now() - started;
    const sorted = timings.map((t) => t.ms).sort((a, b) => a - b);
    console.log(
      `[measure] kubernetes (stand-in) ${count} concurrent create -> ready: median ${sorted[Math.floor(count / 2)]} ms, max ${sorted.at(-1)} ms, wall ${wall} ms`,
    );
    expect(new Set(timings.map((t) => t.ref.id)).size).toBe(count);
    // One informer per backend: one watch on the API server however many sandboxes start.
    const watches = standin.requests
      .slice(before)
      .filter((r) => r.startsWith(`GET ${podPath}?`) && r.includes('watch=true'));
    expect(watches).toHaveLength(1);
    await Promise.all(timings.map((t) => destroyTestSandbox(redis, backend, t.ref, 3000)));
    const listed = await backend.list();
    expect(listed.filter((s) => timings.some((t) => t.ref.id === s.id))).toEqual([]);
  });

  it('runs a non-root sandbox (spec.user): the agent runs as that uid, with fsGroup, and can write its work tree', async () => {
    const backend = backendWith();
    const jobId = `nonroot-${suffix()}`;
    const ref = await start(backend, request(jobId, { user: '1000:1000' }));
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    const who = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'id',
      kind: 'run',
      shell: true,
      command: 'id -u; id -G',
    });
    expect(who.exitCode).toBe(0);
    const [uid, groups] = await steps.stdout('id');
    expect(uid).toBe('1000');
    expect(groups?.split(' ')).toContain('1000');
    const written = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'w',
      kind: 'writeFile',
      path: 'out/x.txt',
      content: 'ok',
    });
    expect(written.errorMessage).toBeNull();
    await destroyTestSandbox(redis, backend, ref, 3000);
  });

  it('puts the resource policy and the read-only root (emptyDir /tmp) on the pod, and refuses a spec beyond the maximum', async () => {
    const backend = backendWith({
      resourcePolicy: {
        defaults: { cpu: '500m', memory: '256Mi', pids: 64, disk: '1Gi' },
        maxima: { cpu: '1', memory: '512Mi', pids: 256, disk: '10Gi' },
      },
    });
    const refusedJob = `over-${suffix()}`;
    await expect(
      backend.create(request(refusedJob, { resources: { limits: { cpu: '2' } } })),
    ).rejects.toMatchObject({
      reason: 'resource_limit',
      message: 'resources.limits.cpu "2" is above the operator maximum 1 (SANDBOX_MAX_CPU)',
    });
    const jobId = `locked-${suffix()}`;
    const ref = await start(backend, request(jobId, { readOnlyRootFilesystem: true, user: '1000:1000' }));
    const pod = await core.readNamespacedPod({ name: ref.id, namespace });
    const toolchain = pod.spec?.containers.find((c) => c.name === 'toolchain');
    // pids has no per-container field in Kubernetes (the kubelet's podPidsLimit): not on the pod.
    expect(toolchain?.resources).toEqual({
      limits: { cpu: '500m', memory: '256Mi', 'ephemeral-storage': '1Gi' },
    });
    expect(toolchain?.securityContext).toMatchObject({ readOnlyRootFilesystem: true });
    expect(toolchain?.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    expect(pod.spec?.volumes).toContainEqual({ name: 'tmp', emptyDir: { sizeLimit: '1Gi' } });
    expect(pod.spec?.securityContext).toMatchObject({ runAsUser: 1000, runAsGroup: 1000 });
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    const probe = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'probe',
      kind: 'run',
      shell: true,
      command: 'id -u; touch /x 2>/dev/null || echo root-refused; echo ok > /tmp/x && cat /tmp/x',
    });
    expect(probe.exitCode).toBe(0);
    expect(await steps.stdout('probe')).toEqual(['1000', 'root-refused', 'ok']);
    await destroyTestSandbox(redis, backend, ref, 3000);
  });
});
