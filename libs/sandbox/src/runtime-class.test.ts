import { describe, expect, it } from 'vitest';
import { buildSandboxPod } from './kubernetes/pod-builder.js';
import { dockerRuntimeFor, kubernetesRuntimeClassFor } from './runtime-class.js';
import { type SandboxSpecInput, SandboxSpecSchema } from './sandbox-spec.js';

describe('runtimeClass: one name, each backend its own', () => {
  it('maps gvisor to the Docker runtime runsc and passes other names through', () => {
    expect(dockerRuntimeFor('gvisor')).toBe('runsc');
    expect(dockerRuntimeFor('kata')).toBe('kata');
    expect(dockerRuntimeFor('gvisor', { gvisor: 'runsc-kvm' })).toBe('runsc-kvm');
    expect(kubernetesRuntimeClassFor('gvisor')).toBe('gvisor');
    expect(kubernetesRuntimeClassFor('kata-qemu')).toBe('kata-qemu');
  });

  it('gives a gvisor sandbox pod the RuntimeClass gvisor (the object, no cluster)', () => {
    const pod = (spec: SandboxSpecInput) =>
      buildSandboxPod({
        jobId: 'job-gv',
        tenant: 'acme',
        spec: SandboxSpecSchema.parse(spec),
        agent: { redisUrl: 'redis://redis:6379', keyStyle: 'tagged' },
        namespace: 'sandboxes',
        carrierImage: 'sandstream/agent-carrier:1.0.0',
        carrierPullPolicy: 'IfNotPresent',
        toolchainPullPolicy: 'IfNotPresent',
        terminationGraceSeconds: 10,
        toolchainReadOnlyRootFilesystem: false,
        templates: [],
      });
    expect(pod({ image: 'debian:bookworm', runtimeClass: 'gvisor' }).spec?.runtimeClassName).toBe('gvisor');
    expect(pod({ image: 'debian:bookworm' }).spec?.runtimeClassName).toBeUndefined();
  });
});
