import { randomBytes } from 'node:crypto';
import type { CoreV1Api, NetworkingV1Api, V1NetworkPolicy } from '@kubernetes/client-node';
import { dockerEngine } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateSandboxRequest, SandboxRef } from '../libs/sandbox/src/backend.js';
import { NON_PUBLIC_IPV4, NON_PUBLIC_IPV6 } from '../libs/sandbox/src/ip-ranges.js';
import type { KubernetesBackend } from '../libs/sandbox/src/kubernetes/index.js';
import type { SandboxSpecInput } from '../libs/sandbox/src/sandbox-spec.js';
import { type KubeSandboxes, startKubeSandboxes } from './helpers/kube-sandboxes.js';
import type { KubeApiStandin } from './kube-api-standin/index.js';
import { kubernetesLeftovers } from './kubernetes-test-env.js';

/**
 * Issue 31 §2 on Kubernetes: every sandbox's NetworkPolicy (internet, none, an allow-list), made
 * before its pod, owned by its pod once that exists, replaced whole by a live update, removed by
 * the garbage collector with the pod. Driven through the real client against the stand-in, which
 * stores policies (schema-checked) but does not enforce them: what is checked is the exact object.
 */
const { docker, skip } = await dockerEngine('kubernetes-egress');
const suffix = () => randomBytes(4).toString('hex');

const redisRule = { to: [{ ipBlock: { cidr: '127.0.0.1/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] };
const dnsRule = {
  to: [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
      podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
    },
  ],
  ports: [
    { protocol: 'UDP', port: 53 },
    { protocol: 'TCP', port: 53 },
  ],
};

describe.skipIf(skip)('Kubernetes egress policies against kube-api-standin', () => {
  const namespace = `k8segress-${suffix()}`;
  let k: KubeSandboxes;
  let standin: KubeApiStandin;
  let core: CoreV1Api;
  let networking: NetworkingV1Api;
  let backend: KubernetesBackend;
  const request = (jobId: string, spec?: Partial<SandboxSpecInput>) => k.request(jobId, spec);
  const start = (req: CreateSandboxRequest) => k.start(req);
  const policyOf = (ref: SandboxRef) =>
    networking.readNamespacedNetworkPolicy({ name: `${ref.id}-egress`, namespace });
  /** What the API server holds, in the form a kubectl get would print (`from`, not `_from`). */
  const specOf = (policy: V1NetworkPolicy) =>
    JSON.parse(JSON.stringify(policy.spec).replaceAll('"_from"', '"from"'));
  const specBase = (ref: SandboxRef) => ({
    podSelector: { matchLabels: { 'sandstream.dev/sandbox': ref.id } },
    policyTypes: ['Ingress', 'Egress'],
    // The api's pods (preview URLs) and nothing else may connect in.
    ingress: [
      {
        from: [
          {
            podSelector: {
              matchLabels: { 'app.kubernetes.io/name': 'api', 'app.kubernetes.io/part-of': 'sandstream' },
            },
          },
        ],
      },
    ],
  });

  beforeAll(async () => {
    k = await startKubeSandboxes({ docker, namespace, backend: { terminationGraceSeconds: 2 } });
    ({ standin, core, networking, backend } = k);
  });

  afterAll(async () => {
    await k?.close();
  });

  it('internet by default, then an allow-list, then none on the running sandbox; deleted with its pod', async () => {
    const jobId = `egress-${suffix()}`;
    const before = standin.requests.length;
    const ref = await start(request(jobId));
    const sent = standin.requests.slice(before);
    const policyPath = `/apis/networking.k8s.io/v1/namespaces/${namespace}/networkpolicies`;
    // Made before the pod, then re-owned by the pod once it has a uid.
    expect(sent.indexOf(`POST ${policyPath}`)).toBeGreaterThan(-1);
    expect(sent.indexOf(`POST /api/v1/namespaces/${namespace}/pods`)).toBeGreaterThan(
      sent.indexOf(`POST ${policyPath}`),
    );
    expect(sent.filter((r) => r === `POST ${policyPath}`)).toHaveLength(1);
    expect(sent.filter((r) => r === `PUT ${policyPath}/${ref.id}-egress`)).toHaveLength(1);

    const pod = await core.readNamespacedPod({ name: ref.id, namespace });
    const created = await policyOf(ref);
    expect(created.metadata?.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Pod', name: ref.id, uid: pod.metadata?.uid, controller: false },
    ]);
    expect(specOf(created)).toEqual({
      ...specBase(ref),
      egress: [
        redisRule,
        dnsRule,
        {
          to: [
            { ipBlock: { cidr: '0.0.0.0/0', except: NON_PUBLIC_IPV4 } },
            { ipBlock: { cidr: '::/0', except: NON_PUBLIC_IPV6 } },
          ],
        },
      ],
    });

    await backend.updateNetwork!(ref, {
      egress: { allow: ['203.0.113.0/24', '198.51.100.7:5432', '10.20.30.40/16'] },
    });
    const allowed = await policyOf(ref);
    expect(allowed.metadata?.uid).toBe(created.metadata?.uid);
    expect(allowed.metadata?.ownerReferences).toEqual(created.metadata?.ownerReferences);
    expect(specOf(allowed)).toEqual({
      ...specBase(ref),
      egress: [
        redisRule,
        { to: [{ ipBlock: { cidr: '203.0.113.0/24' } }, { ipBlock: { cidr: '10.20.0.0/16' } }] },
        {
          to: [{ ipBlock: { cidr: '198.51.100.7/32' } }],
          ports: [
            { protocol: 'TCP', port: 5432 },
            { protocol: 'UDP', port: 5432 },
          ],
        },
      ],
    });

    // A domain cannot be enforced without the egress proxy (kubernetes-egress-proxy.test.ts has
    // one): refused naming the entry, the policy left as it was.
    await expect(backend.updateNetwork!(ref, { egress: { allow: ['example.com'] } })).rejects.toThrow(
      /^network\.egress\.allow\[0\] "example\.com": domain entries need the egress proxy \(the backend option egressProxy\), and none is configured/,
    );
    expect((await policyOf(ref)).metadata?.resourceVersion).toBe(allowed.metadata?.resourceVersion);

    await backend.updateNetwork!(ref, { egress: 'none' });
    expect(specOf(await policyOf(ref))).toEqual({ ...specBase(ref), egress: [redisRule] });

    // Whoever deletes the pod (here not destroy()), the garbage collector takes the policy with it.
    await core.deleteNamespacedPod({ name: ref.id, namespace, gracePeriodSeconds: 0 });
    await expect
      .poll(() => kubernetesLeftovers(standin, docker, namespace, jobId), { timeout: 30_000, interval: 200 })
      .toEqual([]);
  }, 90_000);

  it('refuses a domain entry at create, naming the field, and leaves nothing behind', async () => {
    const jobId = `domain-${suffix()}`;
    const before = standin.requests.length;
    await expect(
      backend.create(request(jobId, { network: { egress: { allow: ['10.0.0.0/8', '*.example.com'] } } })),
    ).rejects.toMatchObject({
      reason: 'backend_error',
      message: expect.stringMatching(
        /^spec\.network\.egress\.allow\[1\] "\*\.example\.com": domain entries need the egress proxy/,
      ),
    });
    expect(standin.requests.slice(before).filter((r) => r.startsWith('POST '))).toEqual([]);
    expect(await kubernetesLeftovers(standin, docker, namespace, jobId)).toEqual([]);
  });
});
