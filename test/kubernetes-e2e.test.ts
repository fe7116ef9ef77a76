import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import { createKeySpace, InstallationIdentity } from '@sandstream/bus';
import { dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { SandboxLabels } from '../libs/sandbox/src/backend.js';
import { createKubernetesBackend } from '../libs/sandbox/src/kubernetes/index.js';
import { SandboxSpecSchema } from '../libs/sandbox/src/sandbox-spec.js';
import { outputLines, waitAll } from './e2e/job-helpers.js';
import { type KubeStack, startKubeStack, writeStandinKubeconfig } from './helpers/kube-stack.js';
import { type KubeApiStandin, startKubeApiStandin } from './kube-api-standin/index.js';
import { images } from './kubernetes-test-env.js';

/**
 * The four services as separate processes with SANDBOX_TYPE=kubernetes: pod-lifecycle and the
 * reaper load a kubeconfig file (as they would outside a cluster) pointing at the API stand-in,
 * and jobs submitted through the SDK run in pods on Docker. With per-sandbox Redis ACL users
 * (SANDBOX_ACL=auto), the agent's Redis URL travels in a per-sandbox Secret.
 */
const { docker, skip } = await dockerEngine('kubernetes-e2e');
const poll = { timeout: 20_000, interval: 100 };

describe.skipIf(skip)('end to end on the Kubernetes backend (kube-api-standin)', () => {
  let standin: KubeApiStandin;
  let stack: KubeStack;
  const scratch = mkdtempSync(join(tmpdir(), 'k8s-e2e-'));
  const namespace = 'sandstream-e2e';
  // Job ids of this run, and the reaper's lane: it must not touch other suites' jobs in the shared Redis.
  const prefix = `k8se2e-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    standin = await startKubeApiStandin({ docker });
    const kubeconfig = writeStandinKubeconfig(standin, scratch, namespace);
    // A job template as an operator would write it: deny-egress plus a pod template (seeds/002).
    const templates = join(scratch, 'templates.yaml');
    writeFileSync(
      templates,
      stringify({
        templates: {
          locked: {
            image: images.busybox,
            network: 'deny-egress',
            podTemplate: {
              metadata: { labels: { 'example.com/locked': 'yes' } },
              spec: {
                containers: [{ name: 'toolchain', env: [{ name: 'FROM_TEMPLATE', value: 'locked' }] }],
              },
            },
          },
        },
      }),
    );
    stack = await startKubeStack({
      SANDBOX_TYPE: 'kubernetes',
      // The shared test Redis has an open `default` user (the guard: open-redis.test.ts).
      SANDSTREAM_ALLOW_OPEN_REDIS: '1',
      KUBECONFIG: kubeconfig,
      SANDSTREAM_K8S_NAMESPACE: namespace,
      SANDSTREAM_AGENT_CARRIER_IMAGE: images.carrier,
      SANDSTREAM_TEMPLATES_FILE: templates,
      SCHEDULER_GLOBAL_SLOTS: '4',
      SCHEDULER_TENANT_SLOTS: '4',
      STEP_GRACE_MS: '3000',
      DESTROY_GRACE_SECONDS: '3',
      REAPER_INTERVAL_SECONDS: '2',
      REAPER_JOB_GLOB: `${prefix}-*`,
      // The reaper destroys only its own installation's orphans, after their grace.
      SANDSTREAM_INSTALLATION: prefix,
      REAPER_SANDBOX_GRACE_SECONDS: '2',
    });
  }, 240_000);

  afterAll(async () => {
    await stack?.stop();
    await standin?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('runs jobs in pods, streams their output, and leaves no pod, policy or secret behind', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { jobId } = await stack.client.submit({
        id: `${prefix}-job${i}`,
        // Job 3 names the template; the others an image.
        ...(i === 3 ? { template: 'locked' } : { image: i % 2 === 0 ? images.busybox : images.debian }),
        tenant: 'e2e',
        steps: [
          { kind: 'writeFile', path: 'msg.txt', content: `job ${i}\n` },
          { command: 'cat', args: ['msg.txt'] },
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell default expansion, not a JS template
          { command: 'sh', args: ['-c', 'echo "template=${FROM_TEMPLATE:-none}"'] },
        ],
      });
      ids.push(jobId);
    }
    const records = await waitAll(stack.client, ids, 150_000);
    const states = ids.map((id) => records.get(id)?.state);
    expect(states, stack.logs().slice(-6000)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    for (let i = 0; i < ids.length; i++) {
      expect(await outputLines(stack.client, ids[i]!)).toEqual([
        `step-2:job ${i}`,
        `step-3:template=${i === 3 ? 'locked' : 'none'}`,
      ]);
    }
    // pod-lifecycle created them through the API: pods and their NetworkPolicies.
    const created = standin.requests.filter((r) => r.startsWith('POST '));
    expect(created.filter((r) => r.endsWith('/pods'))).toHaveLength(4);
    // Every sandbox has its policy now (internet too: never the cluster's private ranges).
    expect(created.filter((r) => r.endsWith('/networkpolicies'))).toHaveLength(4);
    const secretsCreated = created.filter((r) => r.endsWith('/secrets')).length;
    console.log(`[measure] kubernetes e2e: ${secretsCreated} per-sandbox Redis URL secrets for 4 jobs`);

    // Destroys run after the jobs finish; wait for the namespace to empty.
    const core = standin.kubeConfig(namespace).makeApiClient(CoreV1Api);
    await expect
      .poll(
        async () => {
          const [pods, secrets] = await Promise.all([
            core.listNamespacedPod({ namespace }),
            core.listNamespacedSecret({ namespace }),
          ]);
          return [...pods.items, ...secrets.items].map((o) => `${o.kind ?? ''} ${o.metadata?.name}`);
        },
        { timeout: 60_000, interval: 250 },
      )
      .toEqual([]);
  }, 240_000);

  it('creates a live sandbox as a pod, runs commands in it, and deletes the pod on close', async () => {
    const sandbox = await stack.client.sandboxes.create({
      id: `${prefix}-live`,
      image: images.busybox,
      tenant: 'e2e',
    });
    const core = standin.kubeConfig(namespace).makeApiClient(CoreV1Api);
    const podsOfSandbox = async () =>
      (await core.listNamespacedPod({ namespace })).items.filter(
        (p) => p.metadata?.labels?.[SandboxLabels.jobId] === sandbox.id,
      );
    expect(await podsOfSandbox()).toHaveLength(1);
    await sandbox.files.write('n.txt', 'in a pod');
    const [cat, slow] = await Promise.all([
      sandbox.exec(['cat', 'n.txt']),
      sandbox.exec('sleep 1; echo done'),
    ]);
    expect(cat).toMatchObject({ exitCode: 0, stdout: 'in a pod\n' });
    expect(slow).toMatchObject({ exitCode: 0, stdout: 'done\n' });

    // The live network update, through the sandbox-network queue to pod-lifecycle: the pod's
    // NetworkPolicy is replaced; a domain entry is refused naming it, as unsupported here.
    const networking = standin.kubeConfig(namespace).makeApiClient(NetworkingV1Api);
    const [pod] = await podsOfSandbox();
    const policyOf = () =>
      networking.readNamespacedNetworkPolicy({ name: `${pod?.metadata?.name}-egress`, namespace });
    expect((await policyOf()).spec?.egress?.at(-1)?.to?.[0]?.ipBlock?.cidr).toBe('0.0.0.0/0');
    const allow = { egress: { allow: ['203.0.113.0/24:443'] } };
    expect(await sandbox.network.update(allow)).toEqual(allow);
    expect((await policyOf()).spec?.egress?.at(-1)).toEqual({
      to: [{ ipBlock: { cidr: '203.0.113.0/24' } }],
      ports: [
        { protocol: 'TCP', port: 443 },
        { protocol: 'UDP', port: 443 },
      ],
    });
    await expect(sandbox.network.update({ egress: { allow: ['example.com'] } })).rejects.toThrow(
      /network\.egress\.allow\[0\] "example\.com": domain entries need the egress proxy \(the backend option egressProxy\), and none is configured/,
    );
    expect(await sandbox.close()).toMatchObject({ state: 'closed', reason: 'user' });
    await expect.poll(async () => (await podsOfSandbox()).length, { timeout: 60_000, interval: 250 }).toBe(0);
  }, 120_000);

  it('the reaper (on the Kubernetes backend) destroys a sandbox pod whose job does not exist', async () => {
    const redis = new Redis(testRedisUrl());
    const backend = createKubernetesBackend({
      // The shared test Redis has an open `default` user; the guard is tested in open-redis.test.ts.
      allowOpenRedis: true,
      kubeConfig: standin.kubeConfig(namespace),
      namespace,
      agentCarrierImage: images.carrier,
      redis,
    });
    try {
      const jobId = `${prefix}-orphan`;
      // The id the stack's services keep in its Redis: what makes a job-less pod this reaper's.
      const installationId = await new InstallationIdentity(redis, createKeySpace(stack.namespace)).refresh();
      const ref = await backend.create({
        jobId,
        tenant: 'e2e',
        spec: SandboxSpecSchema.parse({
          image: images.busybox,
          labels: {
            [SandboxLabels.installation]: prefix,
            [SandboxLabels.installationId]: installationId,
          },
        }),
        agent: { redisUrl: testRedisUrl(), keyStyle: 'tagged', heartbeatIntervalMs: 200 },
      });
      // No waitReady: the reaper may well take the pod before its agent is up.
      expect(ref.id).toBeTruthy();
      // The assertion below says what is left (with the services' logs) if this times out.
      await vi
        .waitUntil(async () => !(await backend.list()).some((s) => s.jobId === jobId), {
          timeout: 60_000,
          interval: 250,
        })
        .catch(() => undefined);
      expect(
        (await backend.list()).filter((s) => s.jobId === jobId),
        stack.logs().slice(-3000),
      ).toEqual([]);
      // The pod leaves list() as soon as it is deleted; the reaper logs only once destroy() has
      // also seen it gone and removed its keys, so the line can trail the listing by a moment.
      await vi
        .waitUntil(() => stack.logs().includes('reaper destroyed an orphaned sandbox'), poll)
        .catch(() => undefined);
      expect(stack.logs()).toContain('reaper destroyed an orphaned sandbox');
    } finally {
      await backend.close();
      redis.disconnect();
    }
  }, 120_000);
});
