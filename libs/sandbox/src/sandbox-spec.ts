import { SpecNetworkSchema } from '@sandstream/wire';
import { z } from 'zod';

/** Kubernetes-style quantities, e.g. "500m" cpu or "512Mi" memory. */
export const cpuQuantity = z
  .string()
  .regex(/^(\d+(\.\d+)?|\d+m)$/, 'cpu must be a number of cores ("0.5", "2") or millicores ("500m")');
export const memoryQuantity = z
  .string()
  .regex(
    /^\d+(\.\d+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$/,
    'memory must be bytes or a quantity such as "512Mi" or "2Gi"',
  );

export const ResourcesSchema = z.object({
  requests: z
    .object({
      cpu: cpuQuantity.optional(),
      memory: memoryQuantity.optional(),
      ephemeralStorage: memoryQuantity.optional(),
    })
    .optional(),
  limits: z
    .object({
      cpu: cpuQuantity.optional(),
      memory: memoryQuantity.optional(),
      /**
       * Disk the sandbox may fill: its work tree, its own writable layer and any tmpfs together
       * (seed 003's MaxTotalSize). Kubernetes `ephemeral-storage`; Docker a storage quota where the
       * driver has one, else a watched budget; in-process a watched budget on its directory
       * (docs/sandbox-backends.md, "Disk").
       */
      ephemeralStorage: memoryQuantity.optional(),
      /**
       * Processes and threads the sandbox may hold at once (Docker PidsLimit). Kubernetes has no
       * per-pod field for it: there the kubelet's podPidsLimit applies.
       */
      pids: z.number().int().positive().optional(),
    })
    .optional(),
});
export type Resources = z.infer<typeof ResourcesSchema>;

/** A secret reaches the sandbox as environment from the backend's own secret store, never through Redis. */
export const SecretEnvRefSchema = z.object({
  /** Kubernetes Secret name; for Docker and in-process, the name of an environment variable of the backend's own process. */
  secretName: z.string().min(1),
  key: z.string().min(1),
});
export type SecretEnvRef = z.infer<typeof SecretEnvRefSchema>;

export const TolerationSchema = z.object({
  key: z.string().optional(),
  operator: z.enum(['Exists', 'Equal']).optional(),
  value: z.string().optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
  tolerationSeconds: z.number().int().optional(),
});

const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/, 'environment variable names are letters, digits and _ . -');
const labelMap = z.record(z.string().max(317), z.string().max(63));

/**
 * What a sandbox is made of, after template resolution. Every backend honours what it can and
 * says in its docs what it ignores (a child process has no node selector).
 */
export const SandboxSpecSchema = z.object({
  /** The toolchain image, unmodified. Ignored by the in-process backend. */
  image: z.string().min(1).max(1024),
  env: z.record(envName, z.string()).default({}),
  secretEnv: z.record(envName, SecretEnvRefSchema).default({}),
  resources: ResourcesSchema.default({}),
  /** How long create → ready may take before the start counts as failed. */
  startDeadlineSeconds: z.number().positive().max(3600).default(120),
  workingDirectory: z.string().default('/work'),
  /** uid[:gid] to run the toolchain container as; default: the image's user. */
  user: z
    .string()
    .regex(/^\d+(:\d+)?$/, 'user must be "uid" or "uid:gid"')
    .optional(),
  /**
   * The root filesystem read-only. /tmp (a tmpfs / emptyDir) and the workspace stay writable. Off
   * by default so `apt-get` / `pip install` work in the image as it is.
   */
  readOnlyRootFilesystem: z.boolean().default(false),
  /**
   * The isolation runtime: `gvisor` is runsc on Docker and the RuntimeClass `gvisor` on Kubernetes
   * (runtime-class.ts); any other value is the backend's own name (a Docker runtime, a RuntimeClass).
   */
  runtimeClass: z.string().optional(),
  /**
   * Where the sandbox may connect to: `{ egress: 'internet' | 'none' | { allow: [...] } }`, or the
   * older strings `default` (internet) and `deny-egress` (none). See network-policy.ts.
   */
  network: SpecNetworkSchema.default('default'),
  nodeSelector: z.record(z.string(), z.string()).default({}),
  tolerations: z.array(TolerationSchema).default([]),
  imagePullSecrets: z.array(z.string()).default([]),
  labels: labelMap.default({}),
  annotations: z.record(z.string(), z.string()).default({}),
  /** A named workspace that outlives the sandbox (PVC / Docker volume / host directory). */
  persistentWorkspace: z
    .object({ name: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/), size: memoryQuantity.optional() })
    .optional(),
  /**
   * A tenant's volumes, resolved by the scheduler (libs/bus VolumeStore.resolveMounts): each
   * backend object is made at its first mount and outlives every sandbox (docs/volumes.md).
   */
  volumes: z
    .array(
      z.object({
        /** The backend object: Docker volume, PVC, in-process directory (`sandstream-vol-<uid>`). */
        source: z
          .string()
          .regex(/^sandstream-vol-[0-9a-f]{16}$/, 'a volume source is sandstream-vol-<16 hex>'),
        /** The tenant's name for it, for labels and messages. */
        volume: z.string().min(1).max(63),
        mountPath: z.string().regex(/^\//, 'mountPath must be absolute'),
        readOnly: z.boolean().default(false),
        sizeLimitBytes: z.number().int().positive().optional(),
      }),
    )
    .default([]),
  /**
   * Override what runs in the sandbox instead of the agent (rare: the agent is the entrypoint).
   * The agent's settings still arrive as SANDSTREAM_* environment, so a wrapper can start it.
   */
  command: z.array(z.string()).optional(),
  /** Name of the template this spec was resolved from, for labels and logs. */
  template: z.string().optional(),
  /**
   * Kubernetes only: a partial Pod object (metadata/spec) the Kubernetes backend merges into the
   * pod it builds (volumes, sidecars, scheduling). Other backends ignore it.
   */
  podTemplate: z.record(z.string(), z.unknown()).optional(),
});
export type SandboxSpec = z.output<typeof SandboxSpecSchema>;
export type SandboxSpecInput = z.input<typeof SandboxSpecSchema>;
