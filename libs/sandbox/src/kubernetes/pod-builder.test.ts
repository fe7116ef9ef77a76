import { Pod } from 'kubernetes-models/v1/Pod';
import { describe, expect, it } from 'vitest';
import type { AgentConnection } from '../backend.js';
import { type SandboxSpecInput, SandboxSpecSchema } from '../sandbox-spec.js';
import { buildSandboxPod, type SandboxPodInput } from './pod-builder.js';

const agent: AgentConnection = { redisUrl: 'redis://redis.sandstream.svc:6379', keyStyle: 'tagged' };

function input(spec: SandboxSpecInput, extra: Partial<SandboxPodInput> = {}): SandboxPodInput {
  return {
    jobId: 'job-42',
    tenant: 'acme',
    spec: SandboxSpecSchema.parse(spec),
    agent,
    namespace: 'sandboxes',
    carrierImage: 'sandstream/agent-carrier:1.0.0',
    carrierPullPolicy: 'IfNotPresent',
    toolchainPullPolicy: 'IfNotPresent',
    terminationGraceSeconds: 10,
    toolchainReadOnlyRootFilesystem: false,
    templates: [],
    ...extra,
  };
}

/** Throws with the schema's words when the pod is not a valid Kubernetes Pod. */
const validate = (pod: unknown) => new Pod(pod as never).validate();

describe('buildSandboxPod', () => {
  it('builds the minimal pod of seeds/000: agent injected by an init container into /shared, toolchain runs it', () => {
    const pod = buildSandboxPod(input({ image: 'node:20' }));
    expect(() => validate(pod)).not.toThrow();
    const spec = pod.spec!;
    expect(spec.restartPolicy).toBe('Never');
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.volumes).toEqual([
      { name: 'shared', emptyDir: {} },
      { name: 'work', emptyDir: {} },
    ]);
    expect(spec.initContainers).toHaveLength(1);
    expect(spec.initContainers![0]).toMatchObject({
      name: 'inject-agent',
      image: 'sandstream/agent-carrier:1.0.0',
      volumeMounts: [{ name: 'shared', mountPath: '/shared' }],
      securityContext: {
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        readOnlyRootFilesystem: true,
      },
    });
    const toolchain = spec.containers[0]!;
    expect(toolchain).toMatchObject({
      name: 'toolchain',
      image: 'node:20',
      command: [
        '/shared/lib/ld-linux-x86-64.so.2',
        '--library-path',
        '/shared/lib',
        '/shared/sandstream-agent',
      ],
      workingDir: '/work',
      volumeMounts: [
        { name: 'shared', mountPath: '/shared', readOnly: true },
        { name: 'work', mountPath: '/work' },
      ],
      securityContext: {
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        readOnlyRootFilesystem: false,
      },
    });
    const env = Object.fromEntries((toolchain.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      JOB_ID: 'job-42',
      REDIS_URL: agent.redisUrl,
      AGENT_KEY_STYLE: 'tagged',
      AGENT_WORKDIR: '/work',
    });
    expect(spec.securityContext).toEqual({ fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.metadata?.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'sandstream',
      'sandstream.dev/job-id': 'job-42',
      'sandstream.dev/tenant': 'acme',
      'sandstream.dev/sandbox': pod.metadata?.name,
    });
    expect(pod.metadata?.ownerReferences).toBeUndefined();
  });

  it('honours every spec option and stays a valid Pod', () => {
    const pod = buildSandboxPod(
      input(
        {
          image: 'registry.example/team/toolchain:2',
          env: { LANG: 'C.UTF-8' },
          secretEnv: { GIT_TOKEN: { secretName: 'git', key: 'token' } },
          resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { cpu: '2', memory: '2Gi' } },
          workingDirectory: '/src',
          user: '1001:1001',
          runtimeClass: 'gvisor',
          network: 'deny-egress',
          nodeSelector: { pool: 'sandboxes' },
          tolerations: [{ key: 'pool', operator: 'Equal', value: 'sandboxes', effect: 'NoSchedule' }],
          imagePullSecrets: ['regcred'],
          labels: { team: 'infra', 'app.kubernetes.io/managed-by': 'someone-else' },
          annotations: { 'example.com/note': 'hi' },
          template: 'node-ci',
        },
        {
          owner: {
            name: 'pod-lifecycle-7d9f',
            uid: '0b6c2b8e-0000-4000-8000-000000000001',
            namespace: 'sandboxes',
          },
          redisUrlSecret: { secretName: 'sbx-redis', key: 'url' },
          serviceAccountName: 'sandbox-runner',
        },
      ),
    );
    expect(() => validate(pod)).not.toThrow();
    const spec = pod.spec!;
    const toolchain = spec.containers[0]!;
    expect(spec.runtimeClassName).toBe('gvisor');
    expect(spec.nodeSelector).toEqual({ pool: 'sandboxes' });
    expect(spec.tolerations).toEqual([
      { key: 'pool', operator: 'Equal', value: 'sandboxes', effect: 'NoSchedule' },
    ]);
    expect(spec.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(spec.serviceAccountName).toBe('sandbox-runner');
    expect(spec.securityContext).toEqual({
      fsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
      runAsUser: 1001,
      runAsGroup: 1001,
      runAsNonRoot: true,
    });
    expect(toolchain.resources).toEqual({
      requests: { cpu: '500m', memory: '512Mi' },
      limits: { cpu: '2', memory: '2Gi' },
    });
    expect(toolchain.workingDir).toBe('/src');
    expect(toolchain.volumeMounts?.[1]).toEqual({ name: 'work', mountPath: '/src' });
    const env = toolchain.env ?? [];
    expect(env.find((e) => e.name === 'GIT_TOKEN')).toEqual({
      name: 'GIT_TOKEN',
      valueFrom: { secretKeyRef: { name: 'git', key: 'token' } },
    });
    expect(env.find((e) => e.name === 'REDIS_URL')).toEqual({
      name: 'REDIS_URL',
      valueFrom: { secretKeyRef: { name: 'sbx-redis', key: 'url' } },
    });
    expect(JSON.stringify(pod)).not.toContain(agent.redisUrl);
    // A spec label cannot take over the labels the backend finds its pods by.
    expect(pod.metadata?.labels).toMatchObject({
      team: 'infra',
      'app.kubernetes.io/managed-by': 'sandstream',
      'sandstream.dev/template': 'node-ci',
    });
    expect(pod.metadata?.annotations).toMatchObject({
      'example.com/note': 'hi',
      'sandstream.dev/job-id': 'job-42',
    });
    expect(pod.metadata?.ownerReferences).toEqual([
      {
        apiVersion: 'v1',
        kind: 'Pod',
        name: 'pod-lifecycle-7d9f',
        uid: '0b6c2b8e-0000-4000-8000-000000000001',
        controller: false,
      },
    ]);
  });

  it('mounts a persistent workspace as a PVC instead of an emptyDir', () => {
    const pod = buildSandboxPod(
      input({ image: 'node:20', persistentWorkspace: { name: 'ws-acme', size: '5Gi' } }),
    );
    expect(() => validate(pod)).not.toThrow();
    expect(pod.spec?.volumes?.[1]).toEqual({ name: 'work', persistentVolumeClaim: { claimName: 'ws-acme' } });
  });

  it('writes no owner reference to a pod in another namespace (the garbage collector would delete the sandbox)', () => {
    const pod = buildSandboxPod(
      input({ image: 'node:20' }, { owner: { name: 'svc', uid: 'u', namespace: 'sandstream' } }),
    );
    expect(pod.metadata?.ownerReferences).toBeUndefined();
  });

  it('user "0" is an explicit choice of root: runAsNonRoot false', () => {
    const pod = buildSandboxPod(input({ image: 'node:20', user: '0' }));
    expect(pod.spec?.securityContext).toMatchObject({ runAsUser: 0, runAsNonRoot: false });
    expect(() => validate(pod)).not.toThrow();
  });

  it('spec.command replaces the agent command but the agent settings stay in the environment', () => {
    const pod = buildSandboxPod(input({ image: 'node:20', command: ['/bin/sh', '-c', 'exec my-wrapper'] }));
    const toolchain = pod.spec!.containers[0]!;
    expect(toolchain.command).toEqual(['/bin/sh', '-c', 'exec my-wrapper']);
    expect(toolchain.env?.map((e) => e.name)).toEqual(
      expect.arrayContaining(['JOB_ID', 'REDIS_URL', 'AGENT_KEY_STYLE']),
    );
  });

  it('the agent settings win over a spec env var of the same name', () => {
    const pod = buildSandboxPod(
      input({ image: 'node:20', env: { JOB_ID: 'someone-else', REDIS_URL: 'redis://evil:6379' } }),
    );
    const env = pod.spec!.containers[0]!.env!;
    expect(env.filter((e) => e.name === 'JOB_ID')).toEqual([{ name: 'JOB_ID', value: 'job-42' }]);
    expect(env.filter((e) => e.name === 'REDIS_URL')).toEqual([{ name: 'REDIS_URL', value: agent.redisUrl }]);
  });

  it('is pure: the same input gives the same pod', () => {
    const a = buildSandboxPod(input({ image: 'node:20', labels: { a: 'b' } }));
    const b = buildSandboxPod(input({ image: 'node:20', labels: { a: 'b' } }));
    expect(a).toEqual(b);
  });

  it('a read-only root (spec key) gets an emptyDir /tmp; pids never reaches the container resources', () => {
    const pod = buildSandboxPod(
      input({
        image: 'node:20',
        readOnlyRootFilesystem: true,
        resources: { limits: { cpu: '1', pids: 64 } },
      }),
    );
    expect(() => validate(pod)).not.toThrow();
    const toolchain = pod.spec!.containers[0]!;
    expect(toolchain.securityContext?.readOnlyRootFilesystem).toBe(true);
    expect(toolchain.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    expect(pod.spec!.volumes).toContainEqual({ name: 'tmp', emptyDir: {} });
    expect(toolchain.resources).toEqual({ limits: { cpu: '1' } });
  });
});
