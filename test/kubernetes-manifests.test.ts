import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { Pod } from 'kubernetes-models/v1/Pod';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { buildSandboxPod, parsePodTemplate } from '../libs/sandbox/src/kubernetes/index.js';
import { applyResourcePolicy, DEFAULT_RESOURCE_POLICY } from '../libs/sandbox/src/resource-policy.js';
import { SandboxSpecSchema } from '../libs/sandbox/src/sandbox-spec.js';
import { type KubeObject, parseKubeObjects, validateKubeObject } from './helpers/kubernetes-schemas.js';

/**
 * deploy/k8s/base, every document validated against the Kubernetes schemas and checked for what it
 * promises. The overlays built on it: kubernetes-overlays.test.ts.
 */
const dir = fileURLToPath(new URL('../deploy/k8s/base/', import.meta.url));

interface Manifest {
  file: string;
  object: KubeObject;
}

// kustomization.yaml is kustomize's own file, not an object to apply.
const manifests: Manifest[] = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .flatMap((file) =>
    parseKubeObjects(readFileSync(join(dir, file), 'utf8'), file).map((object) => ({ file, object })),
  );

const find = (kind: string, name: string): unknown =>
  manifests.find((m) => m.object.kind === kind && m.object.metadata.name === name)?.object;

describe('deploy/k8s manifests', () => {
  it('has the namespace, RBAC, one Deployment per service, the api behind a Service and a PDB, and the NetworkPolicy example', () => {
    const names = manifests.map((m) => `${m.object.kind}/${m.object.metadata.name}`);
    expect(names).toEqual(
      expect.arrayContaining([
        'Namespace/sandstream',
        'ServiceAccount/sandstream-sandbox-manager',
        'Role/sandstream-sandbox-manager',
        'RoleBinding/sandstream-sandbox-manager',
        'Deployment/scheduler',
        'Deployment/pod-lifecycle',
        'Deployment/step-dispatcher',
        'Deployment/reaper',
        'Deployment/api',
        'Service/api',
        'PodDisruptionBudget/api',
        'NetworkPolicy/sandstream-sandbox-floor',
        'StatefulSet/nats',
        'Service/nats',
      ]),
    );
  });

  it.each(manifests.map((m) => [`${m.file}: ${m.object.kind}/${m.object.metadata.name}`, m] as const))(
    '%s is valid against the Kubernetes schema',
    (_title, manifest) => {
      expect(() => validateKubeObject(manifest.object)).not.toThrow();
    },
  );

  it('runs Redis with an fsynced AOF on a volume and no default user, its users from a Secret', () => {
    const config = find('ConfigMap', 'sandstream-redis-config') as { data: Record<string, string> };
    const conf = config.data['redis.conf']!;
    expect(conf).toMatch(/^appendonly yes$/m);
    expect(conf).toMatch(/^appendfsync everysec$/m);
    expect(conf).toMatch(/^aclfile \/etc\/redis\/acl\/users\.acl$/m);
    const redis = new StatefulSet(find('StatefulSet', 'redis') as never);
    const pod = redis.spec!.template.spec!;
    expect(pod.volumes?.find((v) => v.name === 'acl')?.secret?.secretName).toBe('sandstream-redis');
    expect(redis.spec!.volumeClaimTemplates?.[0]?.metadata?.name).toBe('data');
    expect(pod.containers[0]!.volumeMounts?.find((m) => m.name === 'data')?.mountPath).toBe('/data');
  });

  it('runs NATS with JetStream on a volume, its password from a Secret, reachable by the services only', () => {
    const config = find('ConfigMap', 'sandstream-nats-config') as { data: Record<string, string> };
    const conf = config.data['nats.conf']!;
    expect(conf).toMatch(/jetstream \{[^}]*store_dir: \/data/);
    expect(conf).toMatch(/password: \$NATS_PASSWORD/);
    const nats = new StatefulSet(find('StatefulSet', 'nats') as never);
    const pod = nats.spec!.template.spec!;
    const container = pod.containers[0]!;
    expect(container.env?.find((e) => e.name === 'NATS_PASSWORD')?.valueFrom?.secretKeyRef?.name).toBe(
      'sandstream-nats',
    );
    expect(nats.spec!.volumeClaimTemplates?.[0]?.metadata?.name).toBe('data');
    expect(container.volumeMounts?.find((m) => m.name === 'data')?.mountPath).toBe('/data');
    const service = find('Service', 'nats') as { spec: { ports: { port: number }[] } };
    expect(service.spec.ports.map((p) => p.port)).toEqual([4222]);
    // Sandboxes (managed-by=sandstream) are not among NATS's peers: they could forge archived logs.
    const policy = JSON.stringify(find('NetworkPolicy', 'sandstream-nats-ingress'));
    expect(policy).toContain('"app.kubernetes.io/part-of":"sandstream"');
    expect(policy).not.toContain('managed-by');
  });

  it('gives the reaper (lifecycle relay, log archiver) and pod-lifecycle NATS_URL from the NATS Secret', () => {
    for (const name of ['reaper', 'pod-lifecycle']) {
      const deployment = new Deployment(find('Deployment', name) as never);
      const env = deployment.spec!.template.spec!.containers[0]!.env ?? [];
      expect(env.find((e) => e.name === 'NATS_URL')?.valueFrom?.secretKeyRef, name).toEqual({
        name: 'sandstream-nats',
        key: 'url',
      });
    }
  });

  it('runs the HTTP API with anonymous access off, on all interfaces, behind a Service', () => {
    const deployment = new Deployment(find('Deployment', 'api') as never);
    const env = deployment.spec!.template.spec!.containers[0]!.env ?? [];
    expect(env.find((e) => e.name === 'API_ANONYMOUS')?.value).toBe('off');
    expect(env.find((e) => e.name === 'API_HOST')?.value).toBe('0.0.0.0');
  });

  it('the Role grants exactly what the backend uses: no pods/exec, no wildcards, no secret reads', () => {
    const role = find('Role', 'sandstream-sandbox-manager') as {
      rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
    };
    const grants = Object.fromEntries(
      role.rules.flatMap((r) => r.resources.map((res) => [res, [...r.verbs].sort()])),
    );
    expect(grants).toEqual({
      pods: ['create', 'delete', 'get', 'list', 'watch'],
      'pods/log': ['get'],
      'pods/exec': ['create', 'get'],
      'pods/status': ['get'],
      networkpolicies: ['create', 'delete', 'get', 'update'],
      persistentvolumeclaims: ['create', 'get'],
      secrets: ['create', 'delete', 'update'],
    });
    expect(JSON.stringify(role)).not.toMatch(/pods\/attach|pods\/portforward|"\*"/);
  });

  it('only pod-lifecycle and the reaper run with the API account; pod-lifecycle knows its own pod (downward API)', () => {
    const account = (name: string) =>
      (find('Deployment', name) as { spec: { template: { spec: { serviceAccountName: string } } } }).spec
        .template.spec.serviceAccountName;
    expect(account('pod-lifecycle')).toBe('sandstream-sandbox-manager');
    expect(account('reaper')).toBe('sandstream-sandbox-manager');
    expect(account('scheduler')).toBe('sandstream-service');
    expect(account('step-dispatcher')).toBe('sandstream-service');
    expect(account('api')).toBe('sandstream-service');
    expect(find('ServiceAccount', 'sandstream-service')).toMatchObject({
      automountServiceAccountToken: false,
    });
    const lifecycle = find('Deployment', 'pod-lifecycle') as {
      spec: {
        template: {
          spec: {
            containers: Array<{
              env: Array<{ name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
            }>;
          };
        };
      };
    };
    const env = lifecycle.spec.template.spec.containers[0]!.env;
    expect(env.find((e) => e.name === 'POD_UID')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.uid');
    expect(env.find((e) => e.name === 'POD_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
  });

  it('the operator pod template in the ConfigMap merges into a valid sandbox pod', () => {
    const configMap = find('ConfigMap', 'sandstream-sandbox-pod-template') as {
      data: Record<string, string>;
    };
    const template = parsePodTemplate(parseYaml(configMap.data['pod-template.yaml']!), 'pod-template.yaml');
    const pod = buildSandboxPod({
      jobId: 'job-1',
      tenant: 'acme',
      spec: SandboxSpecSchema.parse({ image: 'node:20', user: '1000' }),
      agent: { redisUrl: 'redis://redis.sandstream.svc.cluster.local:6379', keyStyle: 'tagged' },
      namespace: 'sandstream',
      carrierImage: 'sandstream/agent-carrier:1.0.0',
      carrierPullPolicy: 'IfNotPresent',
      toolchainPullPolicy: 'IfNotPresent',
      terminationGraceSeconds: 10,
      toolchainReadOnlyRootFilesystem: false,
      templates: [template],
    });
    expect(() => new Pod(pod as never).validate()).not.toThrow();
    expect(pod.spec?.nodeSelector).toEqual({ 'sandstream.dev/pool': 'sandboxes' });
    expect(pod.spec?.containers[0]?.resources?.limits).toMatchObject({ memory: '4Gi' });
    expect(pod.spec?.containers[0]?.image).toBe('node:20');
  });

  it('a sandbox pod gets a disk limit: ephemeral-storage on the toolchain, a sizeLimit on its emptyDirs (issue 28)', () => {
    const build = (spec: unknown) =>
      buildSandboxPod({
        jobId: 'job-1',
        tenant: 'acme',
        spec: applyResourcePolicy(SandboxSpecSchema.parse(spec), DEFAULT_RESOURCE_POLICY),
        agent: { redisUrl: 'redis://redis.sandstream.svc.cluster.local:6379', keyStyle: 'tagged' },
        namespace: 'sandstream',
        carrierImage: 'sandstream/agent-carrier:1.0.0',
        carrierPullPolicy: 'IfNotPresent',
        toolchainPullPolicy: 'IfNotPresent',
        terminationGraceSeconds: 10,
        toolchainReadOnlyRootFilesystem: true,
        templates: [],
      });
    // The operator default where the spec sets none (SANDBOX_DEFAULT_DISK).
    const plain = build({ image: 'node:20' });
    expect(() => new Pod(plain as never).validate()).not.toThrow();
    expect(plain.spec?.containers[0]?.resources?.limits?.['ephemeral-storage']).toBe('10Gi');
    const sized = build({
      image: 'node:20',
      resources: { requests: { ephemeralStorage: '1Gi' }, limits: { ephemeralStorage: '2Gi' } },
    });
    expect(() => new Pod(sized as never).validate()).not.toThrow();
    expect(sized.spec?.containers[0]?.resources).toMatchObject({
      requests: { 'ephemeral-storage': '1Gi' },
      limits: { 'ephemeral-storage': '2Gi' },
    });
    const volumes = Object.fromEntries((sized.spec?.volumes ?? []).map((v) => [v.name, v.emptyDir]));
    expect(volumes.work).toEqual({ sizeLimit: '2Gi' });
    expect(volumes.tmp).toEqual({ sizeLimit: '2Gi' });
  });
});
