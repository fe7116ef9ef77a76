import type { V1Container, V1PodSecurityContext } from '@kubernetes/client-node';
import { cpuToNanoCpus, memoryToBytes } from '@sandstream/sandbox';
import type { ContainerCreateOptions, MountSettings } from 'dockerode';
import { ContainerConfigError, expandReferences } from './env-resolver.js';

export interface ContainerPlan {
  /** Docker container name. */
  name: string;
  labels: Record<string, string>;
  container: V1Container;
  podSecurity: V1PodSecurityContext | undefined;
  env: ReadonlyMap<string, string>;
  /** Pod volume name -> Docker volume name. */
  volumes: ReadonlyMap<string, string>;
  /** The image's configured user, to enforce runAsNonRoot as the kubelet does. */
  imageUser: string;
}

/**
 * The library's quantity parsers, made lenient: the stand-in leaves a limit it cannot read unset
 * instead of refusing the pod.
 */
function lenient(convert: (quantity: string) => number, quantity: string): number | undefined {
  try {
    return convert(quantity);
  } catch {
    return undefined;
  }
}

function isRootUser(user: string): boolean {
  const name = user.split(':')[0] ?? '';
  return name === '' || name === '0' || name === 'root';
}

/**
 * One Kubernetes container as `docker create` options: command/args with $(VAR) expansion, env,
 * workingDir, volume mounts (readOnly), user and groups from the security contexts, capabilities,
 * read-only root, no-new-privileges, memory/cpu limits, and the host network so 127.0.0.1 reaches
 * the test's Redis.
 */
export function containerOptions(plan: ContainerPlan): ContainerCreateOptions {
  const { container, podSecurity, env } = plan;
  const security = container.securityContext;
  const runAsUser = security?.runAsUser ?? podSecurity?.runAsUser;
  const runAsGroup = security?.runAsGroup ?? podSecurity?.runAsGroup;
  const runAsNonRoot = security?.runAsNonRoot ?? podSecurity?.runAsNonRoot;
  if (runAsNonRoot && (runAsUser === 0 || (runAsUser === undefined && isRootUser(plan.imageUser)))) {
    throw new ContainerConfigError('container has runAsNonRoot and image will run as root');
  }
  const user =
    runAsUser !== undefined ? `${runAsUser}${runAsGroup !== undefined ? `:${runAsGroup}` : ''}` : undefined;

  const mounts = (container.volumeMounts ?? []).map((mount) => {
    const source = plan.volumes.get(mount.name);
    if (!source)
      throw new ContainerConfigError(`volumeMount ${mount.name}: no volume of that name in the pod`);
    if (mount.subPath)
      throw new ContainerConfigError(`volumeMount ${mount.name}: the stand-in does not support subPath`);
    // NoCopy: an emptyDir starts empty, whatever the image has at the mount path.
    const settings: MountSettings = {
      Type: 'volume',
      Source: source,
      Target: mount.mountPath,
      ReadOnly: mount.readOnly === true,
      VolumeOptions: { NoCopy: true } as MountSettings['VolumeOptions'],
    };
    return settings;
  });

  const groups = [podSecurity?.fsGroup, ...(podSecurity?.supplementalGroups ?? [])].filter(
    (g): g is number => g !== undefined,
  );
  const limits = container.resources?.limits ?? {};
  const memory = limits.memory ? lenient(memoryToBytes, limits.memory) : undefined;
  const cpus = limits.cpu ? lenient(cpuToNanoCpus, limits.cpu) : undefined;
  const expand = (items: string[] | undefined) => items?.map((item) => expandReferences(item, env));

  const options: ContainerCreateOptions = {
    name: plan.name,
    Image: container.image,
    Env: [...env].map(([k, v]) => `${k}=${v}`),
    Labels: plan.labels,
    HostConfig: {
      NetworkMode: 'host',
      Mounts: mounts,
      GroupAdd: groups.map(String),
      CapDrop: security?.capabilities?.drop ?? [],
      CapAdd: security?.capabilities?.add ?? [],
      ReadonlyRootfs: security?.readOnlyRootFilesystem === true,
      SecurityOpt: security?.allowPrivilegeEscalation === false ? ['no-new-privileges'] : [],
      ...(memory !== undefined ? { Memory: memory } : {}),
      ...(cpus !== undefined ? { NanoCpus: cpus } : {}),
    },
  };
  // Kubernetes: command replaces the image ENTRYPOINT (and then CMD unless args are given); args replace CMD.
  if (container.command) {
    options.Entrypoint = expand(container.command);
    options.Cmd = expand(container.args) ?? [];
  } else if (container.args) {
    options.Cmd = expand(container.args);
  }
  if (container.workingDir) options.WorkingDir = container.workingDir;
  if (user) options.User = user;
  return options;
}
