import type Dockerode from 'dockerode';
import { cpuToNanoCpus, memoryToBytes } from '../quantity.js';
import type { SandboxSpec } from '../sandbox-spec.js';

/** Where the carrier puts the agent, and how the agent is started without the image's libc. */
export const SHARED_DIR = '/shared';
export const AGENT_LOADER_COMMAND = [
  `${SHARED_DIR}/lib/ld-linux-x86-64.so.2`,
  '--library-path',
  `${SHARED_DIR}/lib`,
  `${SHARED_DIR}/sandstream-agent`,
];

export type WorkMount = { kind: 'volume'; name: string };

export interface ToolchainContainerInput {
  name: string;
  spec: SandboxSpec;
  labels: Record<string, string>;
  sharedVolume: string;
  work: WorkMount;
  networkMode: string;
  /** The container's MAC on that network, which its egress rules match (egress-rules.ts). */
  macAddress?: string;
  /** The engine's runtime for spec.runtimeClass (see runtime-class.ts); the engine default when unset. */
  runtime?: string;
  /** The agent's flags (agentArgs); replaced by spec.command when that is set. */
  agentArgs: string[];
  env: Record<string, string>;
  /** The cgroup the container is created under (HostConfig.CgroupParent); the engine's default when unset. */
  cgroupParent?: string;
  /** The engine caps the writable layer (StorageOpt size): only where detectStorageQuota found it can. */
  storageQuota?: boolean;
}

/**
 * The toolchain container: any unmodified image, the agent as its entrypoint (through the loader
 * on the read-only /shared volume), least privilege by default. Limits come from the spec after the operator's resource policy
 * (resource-policy.ts) filled in what it left unset.
 */
export function toolchainContainerOptions(input: ToolchainContainerInput): Dockerode.ContainerCreateOptions {
  const { spec } = input;
  const limits = spec.resources.limits ?? {};
  const requests = spec.resources.requests ?? {};
  const mounts: Dockerode.MountSettings[] = [
    { Type: 'volume', Source: input.sharedVolume, Target: SHARED_DIR, ReadOnly: true },
  ];
  const hostConfig: Dockerode.HostConfig = {
    Mounts: mounts,
    NetworkMode: input.networkMode,
    SecurityOpt: ['no-new-privileges'],
    CapDrop: ['ALL'],
    // The backend reads the exit code and logs of a crashed agent, then removes the container itself.
    AutoRemove: false,
    RestartPolicy: { Name: 'no' },
    ...(input.cgroupParent ? { CgroupParent: input.cgroupParent } : {}),
  };
  mounts.push({ Type: 'volume', Source: input.work.name, Target: spec.workingDirectory });
  // The tenant's volumes (made, labelled, by the backend's create before this).
  for (const v of spec.volumes) {
    mounts.push({ Type: 'volume', Source: v.source, Target: v.mountPath, ReadOnly: v.readOnly });
  }
  if (spec.readOnlyRootFilesystem) {
    hostConfig.ReadonlyRootfs = true;
    // Tools expect a writable /tmp; a tmpfs counts against the memory limit, so it cannot fill the disk.
    hostConfig.Tmpfs = {
      '/tmp': `rw,nosuid,nodev,mode=1777${limits.ephemeralStorage ? `,size=${memoryToBytes(limits.ephemeralStorage)}` : ''}`,
    };
  }
  if (input.storageQuota && limits.ephemeralStorage) {
    hostConfig.StorageOpt = { size: String(memoryToBytes(limits.ephemeralStorage)) };
  }
  if (limits.memory) {
    hostConfig.Memory = memoryToBytes(limits.memory);
    // Unset, Docker grants as much again in swap: a sandbox at its limit would page the host's disk.
    hostConfig.MemorySwap = hostConfig.Memory;
  }
  if (limits.pids !== undefined) hostConfig.PidsLimit = limits.pids;
  if (requests.memory) hostConfig.MemoryReservation = memoryToBytes(requests.memory);
  if (limits.cpu) hostConfig.NanoCpus = cpuToNanoCpus(limits.cpu);
  // CPU shares are relative weights (1024 = one core's worth), the nearest Docker has to a request.
  if (requests.cpu)
    hostConfig.CpuShares = Math.max(2, Math.round((cpuToNanoCpus(requests.cpu) / 1e9) * 1024));
  if (input.runtime) hostConfig.Runtime = input.runtime;

  return {
    name: input.name,
    Image: spec.image,
    Entrypoint: spec.command ?? [...AGENT_LOADER_COMMAND, ...input.agentArgs],
    // An explicit entrypoint already discards the image's CMD; an empty Cmd says so explicitly.
    Cmd: [],
    Env: Object.entries(input.env).map(([k, v]) => `${k}=${v}`),
    WorkingDir: spec.workingDirectory,
    User: spec.user ?? '',
    Labels: input.labels,
    HostConfig: hostConfig,
    ...(input.macAddress ? { MacAddress: input.macAddress } : {}),
  };
}
