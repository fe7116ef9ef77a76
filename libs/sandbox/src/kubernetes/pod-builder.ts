import type { V1Container, V1EnvVar, V1Pod, V1ResourceRequirements, V1Volume } from '@kubernetes/client-node';
import type { AgentConnection } from '../backend.js';
import { SandboxLabels } from '../backend.js';
import { kubernetesRuntimeClassFor } from '../runtime-class.js';
import type { SandboxSpec } from '../sandbox-spec.js';
import { agentCommand, agentEnvVars, SHARED_MOUNT } from './agent-launch.js';
import { sandboxPodName } from './kube-names.js';
import type { OwnerPod } from './kubernetes-settings.js';
import { ownerReferencesFor } from './owner-reference.js';
import type { PodTemplate } from './pod-template.js';
import { mergePodTemplates } from './pod-template-merge.js';
import { identityAnnotations, identityLabels, SANDBOX_POD_LABEL } from './sandbox-metadata.js';

export const INJECT_CONTAINER = 'inject-agent';
export const TOOLCHAIN_CONTAINER = 'toolchain';
/** fsGroup makes the injected agent group-readable from any non-root toolchain image (seeds/001). */
export const SANDBOX_FS_GROUP = 1000;

type PullPolicy = 'Always' | 'IfNotPresent' | 'Never';

export interface SandboxPodInput {
  jobId: string;
  tenant: string;
  spec: SandboxSpec;
  agent: AgentConnection;
  namespace: string;
  carrierImage: string;
  carrierPullPolicy: PullPolicy;
  toolchainPullPolicy: PullPolicy;
  owner?: OwnerPod;
  /** Where REDIS_URL comes from; absent: agent.redisUrl is written as a plain value. */
  redisUrlSecret?: { secretName: string; key: string };
  serviceAccountName?: string;
  terminationGraceSeconds: number;
  toolchainReadOnlyRootFilesystem: boolean;
  /** Applied in order: operator-wide first, then the job template's own. */
  templates: readonly PodTemplate[];
  /** HTTPS_PROXY and the like, for a sandbox whose domains go through the egress proxy. */
  proxyEnv?: readonly V1EnvVar[];
}

/** The restricted container context every container the backend generates gets. */
function restrictedContext(readOnlyRootFilesystem: boolean): V1Container['securityContext'] {
  return {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    readOnlyRootFilesystem,
  };
}

function toolchainEnv(input: SandboxPodInput): V1EnvVar[] {
  // One entry per name, later sources winning, and the agent's own settings last so that a
  // spec cannot point the agent at another job's keys.
  const byName = new Map<string, V1EnvVar>();
  for (const [name, value] of Object.entries(input.spec.env)) byName.set(name, { name, value });
  for (const [name, value] of Object.entries(input.agent.agentEnv ?? {})) byName.set(name, { name, value });
  for (const [name, ref] of Object.entries(input.spec.secretEnv)) {
    byName.set(name, { name, valueFrom: { secretKeyRef: { name: ref.secretName, key: ref.key } } });
  }
  // After the spec's own: a spec cannot point its clients past the proxy (its policy would drop
  // the connections anyway, but the sandbox's tools would then fail for a reason it cannot see).
  for (const env of input.proxyEnv ?? []) byName.set(env.name, env);
  for (const env of agentEnvVars(input.jobId, input.agent, input.spec.workingDirectory)) {
    byName.set(env.name, env);
  }
  byName.set(
    'REDIS_URL',
    input.redisUrlSecret
      ? {
          name: 'REDIS_URL',
          valueFrom: {
            secretKeyRef: { name: input.redisUrlSecret.secretName, key: input.redisUrlSecret.key },
          },
        }
      : { name: 'REDIS_URL', value: input.agent.redisUrl },
  );
  return [...byName.values()];
}

function toolchainResources(spec: SandboxSpec): V1ResourceRequirements | undefined {
  const { requests, limits } = spec.resources;
  // pids is not a container resource in Kubernetes (the kubelet's podPidsLimit bounds it): left out.
  const clean = (
    r:
      | { cpu?: string | undefined; memory?: string | undefined; ephemeralStorage?: string | undefined }
      | undefined,
  ) => {
    const entries = Object.entries({
      cpu: r?.cpu,
      memory: r?.memory,
      // The kubelet evicts the pod past it: work tree emptyDir, container layer and logs together.
      'ephemeral-storage': r?.ephemeralStorage,
    }).filter((entry): entry is [string, string] => entry[1] !== undefined);
    return entries.length > 0 ? Object.fromEntries(entries) : undefined;
  };
  const result: V1ResourceRequirements = {};
  const req = clean(requests);
  const lim = clean(limits);
  if (req) result.requests = req;
  if (lim) result.limits = lim;
  return req || lim ? result : undefined;
}

/** An emptyDir past its sizeLimit gets its pod evicted, even before the pod's own limit is reached. */
function workSizeLimit(spec: SandboxSpec): { sizeLimit?: string } {
  const limit = spec.resources.limits?.ephemeralStorage;
  return limit ? { sizeLimit: limit } : {};
}

function userContext(user: string | undefined) {
  if (!user) return {};
  const [uid, gid] = user.split(':').map(Number);
  return {
    runAsUser: uid,
    ...(gid !== undefined ? { runAsGroup: gid } : {}),
    // Asked for a non-root uid: let the kubelet enforce it. uid 0 is an explicit choice of root.
    runAsNonRoot: uid !== 0,
  };
}

/**
 * Builds the sandbox pod for one job (pure: same input, same pod). Shape from seeds/000 and
 * seeds/001: an init container copies the agent into an emptyDir at /shared, then the unmodified
 * toolchain image runs it from there, with the work tree on its own volume.
 */
export function buildSandboxPod(input: SandboxPodInput): V1Pod {
  const { spec } = input;
  const name = sandboxPodName(input.jobId);
  const workVolume: V1Volume = spec.persistentWorkspace
    ? { name: 'work', persistentVolumeClaim: { claimName: spec.persistentWorkspace.name } }
    : { name: 'work', emptyDir: workSizeLimit(spec) };

  // The template's key or the operator's setting; either way /tmp stays writable (an emptyDir).
  const readOnlyRoot = spec.readOnlyRootFilesystem || input.toolchainReadOnlyRootFilesystem;

  const inject: V1Container = {
    name: INJECT_CONTAINER,
    image: input.carrierImage,
    imagePullPolicy: input.carrierPullPolicy,
    volumeMounts: [{ name: 'shared', mountPath: SHARED_MOUNT }],
    // Copying a few files: small, bounded, and with limits so namespaces with quotas accept it.
    resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
    securityContext: restrictedContext(true),
  };

  const toolchain: V1Container = {
    name: TOOLCHAIN_CONTAINER,
    image: spec.image,
    imagePullPolicy: input.toolchainPullPolicy,
    // spec.command replaces the agent (a wrapper that starts it itself from the environment).
    command: spec.command ?? agentCommand(),
    env: toolchainEnv(input),
    workingDir: spec.workingDirectory,
    volumeMounts: [
      { name: 'shared', mountPath: SHARED_MOUNT, readOnly: true },
      { name: 'work', mountPath: spec.workingDirectory },
      ...(readOnlyRoot ? [{ name: 'tmp', mountPath: '/tmp' }] : []),
      ...spec.volumes.map((v, i) => ({ name: `vol-${i}`, mountPath: v.mountPath, readOnly: v.readOnly })),
    ],
    securityContext: restrictedContext(readOnlyRoot),
  };
  const resources = toolchainResources(spec);
  if (resources) toolchain.resources = resources;

  const labels = {
    ...spec.labels,
    ...(spec.template ? { [SandboxLabels.template]: spec.template } : {}),
    [SandboxLabels.keyStyle]: input.agent.keyStyle,
    ...identityLabels(input.jobId, input.tenant),
    [SANDBOX_POD_LABEL]: name,
  };
  const ownerReferences = ownerReferencesFor(input.owner, input.namespace);

  const pod: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: input.namespace,
      labels,
      annotations: { ...spec.annotations, ...identityAnnotations(input.jobId, input.tenant) },
      ...(ownerReferences ? { ownerReferences } : {}),
    },
    spec: {
      restartPolicy: 'Never',
      // Untrusted code gets no API credentials and no environment describing other services.
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: input.terminationGraceSeconds,
      securityContext: {
        fsGroup: SANDBOX_FS_GROUP,
        seccompProfile: { type: 'RuntimeDefault' },
        ...userContext(spec.user),
      },
      volumes: [
        { name: 'shared', emptyDir: {} },
        workVolume,
        ...(readOnlyRoot ? [{ name: 'tmp', emptyDir: workSizeLimit(spec) }] : []),
        // The tenant's volumes: their claims, made by create (ensureWorkspaceClaim).
        ...spec.volumes.map((v, i) => ({
          name: `vol-${i}`,
          persistentVolumeClaim: { claimName: v.source, readOnly: v.readOnly },
        })),
      ],
      initContainers: [inject],
      containers: [toolchain],
      ...(input.serviceAccountName ? { serviceAccountName: input.serviceAccountName } : {}),
      ...(spec.runtimeClass ? { runtimeClassName: kubernetesRuntimeClassFor(spec.runtimeClass) } : {}),
      ...(Object.keys(spec.nodeSelector).length > 0 ? { nodeSelector: { ...spec.nodeSelector } } : {}),
      ...(spec.tolerations.length > 0 ? { tolerations: spec.tolerations.map((t) => ({ ...t })) } : {}),
      ...(spec.imagePullSecrets.length > 0
        ? { imagePullSecrets: spec.imagePullSecrets.map((secret) => ({ name: secret })) }
        : {}),
    },
  };
  return mergePodTemplates(pod, input.templates);
}
