import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pod } from 'kubernetes-models/v1/Pod';
import { describe, expect, it } from 'vitest';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { buildSandboxPod } from './pod-builder.js';
import { type PodTemplate, parsePodTemplate } from './pod-template.js';
import { loadPodTemplateFile } from './pod-template-file.js';

const validate = (pod: unknown) => new Pod(pod as never).validate();

function podWith(...templates: PodTemplate[]) {
  return buildSandboxPod({
    jobId: 'job-7',
    tenant: 'acme',
    spec: SandboxSpecSchema.parse({
      image: 'python:3.12',
      nodeSelector: { 'kubernetes.io/arch': 'amd64' },
      tolerations: [{ key: 'spot', operator: 'Exists', effect: 'NoSchedule' }],
      imagePullSecrets: ['team-regcred'],
    }),
    agent: { redisUrl: 'redis://redis:6379', keyStyle: 'tagged' },
    namespace: 'sandboxes',
    carrierImage: 'sandstream/agent-carrier:1.0.0',
    carrierPullPolicy: 'IfNotPresent',
    toolchainPullPolicy: 'IfNotPresent',
    terminationGraceSeconds: 10,
    toolchainReadOnlyRootFilesystem: false,
    templates,
  });
}

// The customisations of seeds/002, written against our container names.
const nfsVolume: PodTemplate = {
  spec: {
    containers: [{ name: 'toolchain', volumeMounts: [{ mountPath: '/data/', name: 'sb-data' }] }],
    volumes: [{ name: 'sb-data', nfs: { path: '/data/', server: 'nas.ip' } }],
  },
};
const nodeScheduling: PodTemplate = {
  spec: {
    nodeSelector: { 'xxx/instance-type': 'xxx-node' },
    tolerations: [{ effect: 'NoSchedule', key: 'xxx/instance-type', operator: 'Equal', value: 'xxx-node' }],
  },
};
const privateRegistry: PodTemplate = { spec: { imagePullSecrets: [{ name: 'regsecret-enterprise' }] } };
const sidecar: PodTemplate = {
  spec: {
    initContainers: [{ name: 'sidecar', image: 'fluent/fluent-bit:3', restartPolicy: 'Always' }],
  },
};

describe('pod templates merged into the generated pod', () => {
  it('seeds/002 NAS volume: the volume is appended and the mount merged into the toolchain container', () => {
    const pod = podWith(nfsVolume);
    expect(() => validate(pod)).not.toThrow();
    expect(pod.spec?.volumes?.map((v) => v.name)).toEqual(['shared', 'work', 'sb-data']);
    expect(pod.spec?.volumes?.[2]).toEqual({ name: 'sb-data', nfs: { path: '/data/', server: 'nas.ip' } });
    const toolchain = pod.spec?.containers.find((c) => c.name === 'toolchain');
    expect(toolchain?.volumeMounts?.map((m) => m.mountPath)).toEqual(['/shared', '/work', '/data/']);
    // Merged, not replaced: the generated container keeps its image and command.
    expect(toolchain?.image).toBe('python:3.12');
    expect(toolchain?.command?.[0]).toBe('/shared/lib/ld-linux-x86-64.so.2');
    expect(pod.spec?.containers).toHaveLength(1);
  });

  it('seeds/002 node scheduling: nodeSelector entries combine, tolerations are appended', () => {
    const pod = podWith(nodeScheduling);
    expect(() => validate(pod)).not.toThrow();
    expect(pod.spec?.nodeSelector).toEqual({
      'kubernetes.io/arch': 'amd64',
      'xxx/instance-type': 'xxx-node',
    });
    expect(pod.spec?.tolerations).toEqual([
      { key: 'spot', operator: 'Exists', effect: 'NoSchedule' },
      { effect: 'NoSchedule', key: 'xxx/instance-type', operator: 'Equal', value: 'xxx-node' },
    ]);
  });

  it('seeds/002 private registry: imagePullSecrets combine by name', () => {
    const pod = podWith(privateRegistry, { spec: { imagePullSecrets: [{ name: 'team-regcred' }] } });
    expect(() => validate(pod)).not.toThrow();
    expect(pod.spec?.imagePullSecrets).toEqual([{ name: 'team-regcred' }, { name: 'regsecret-enterprise' }]);
  });

  it('seeds/002 sidecar: an init container with restartPolicy Always is appended after the agent injection', () => {
    const pod = podWith(sidecar);
    expect(() => validate(pod)).not.toThrow();
    expect(pod.spec?.initContainers?.map((c) => [c.name, c.restartPolicy])).toEqual([
      ['inject-agent', undefined],
      ['sidecar', 'Always'],
    ]);
  });

  it('applies templates in order (operator-wide, then the job template) and later ones win on values', () => {
    const pod = podWith(
      {
        spec: {
          containers: [
            {
              name: 'toolchain',
              env: [{ name: 'MODE', value: 'operator' }],
              resources: { limits: { memory: '1Gi' } },
            },
          ],
        },
      },
      { spec: { containers: [{ name: 'toolchain', env: [{ name: 'MODE', value: 'template' }] }] } },
    );
    expect(() => validate(pod)).not.toThrow();
    const toolchain = pod.spec!.containers[0]!;
    expect(toolchain.env?.filter((e) => e.name === 'MODE')).toEqual([{ name: 'MODE', value: 'template' }]);
    expect(toolchain.resources).toEqual({ limits: { memory: '1Gi' } });
  });

  it('adds labels and annotations but cannot change the identity labels, name or namespace', () => {
    const pod = podWith({
      metadata: {
        labels: { team: 'ml', 'sandstream.dev/job-id': 'hijack', 'app.kubernetes.io/managed-by': 'other' },
        annotations: { 'example.com/cost-center': '42' },
        name: 'renamed',
        namespace: 'elsewhere',
      },
    });
    expect(pod.metadata?.labels).toMatchObject({
      team: 'ml',
      'sandstream.dev/job-id': 'job-7',
      'app.kubernetes.io/managed-by': 'sandstream',
    });
    expect(pod.metadata?.annotations).toMatchObject({ 'example.com/cost-center': '42' });
    expect(pod.metadata?.name).toMatch(/^sbx-job-7-/);
    expect(pod.metadata?.namespace).toBe('sandboxes');
  });

  it('null removes a generated field, as in a strategic merge patch', () => {
    const pod = podWith({
      spec: { initContainers: [{ name: 'inject-agent', resources: null }] },
    } as PodTemplate);
    expect(pod.spec?.initContainers?.[0]?.resources).toBeUndefined();
    expect(() => validate(pod)).not.toThrow();
  });

  it('a template that breaks the pod is caught by schema validation', () => {
    const pod = podWith({ spec: { restartPolicy: 'Sometimes' } });
    expect(() => validate(pod)).toThrow(/restartPolicy/);
  });

  it('accepts a kind: PodTemplate wrapper and a YAML file, and names the field of a bad one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pod-template-'));
    const file = join(dir, 'template.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: PodTemplate',
        'template:',
        '  spec:',
        '    nodeSelector:',
        '      xxx/instance-type: xxx-node',
        '',
      ].join('\n'),
    );
    const pod = podWith(loadPodTemplateFile(file));
    expect(pod.spec?.nodeSelector).toMatchObject({ 'xxx/instance-type': 'xxx-node' });
    expect(() => parsePodTemplate({ kind: 'Deployment' }, 'SANDSTREAM_K8S_POD_TEMPLATE_FILE')).toThrow(
      /SANDSTREAM_K8S_POD_TEMPLATE_FILE\.kind: podTemplate\.kind must be Pod or PodTemplate/,
    );
    writeFileSync(file, 'spec: [unclosed');
    expect(() => loadPodTemplateFile(file)).toThrow(/is not valid YAML/);
  });
});
