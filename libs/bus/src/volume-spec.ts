import { strictObject } from '@sandstream/wire';
import { z } from 'zod';

/**
 * Volumes: named storage of a tenant that outlives the sandboxes mounting it (docs/volumes.md).
 * The schemas of the edges where people type (create, a sandbox's or job's `volumes`), strict and
 * bounded like the job spec, and the record the store keeps.
 */

/** A DNS label: it becomes part of a PVC / Docker volume label and of a Redis field. */
export const VolumeNameSchema = z
  .string()
  .min(1, 'a volume name must not be empty')
  .max(63, 'a volume name is at most 63 characters')
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
    'a volume name is lower-case letters, digits and "-", starting and ending with a letter or digit',
  );

/** The largest size limit one volume may ask for (1 TiB); the tenant's byte quota bounds the sum. */
export const VOLUME_MAX_SIZE_BYTES = 2 ** 40;
/** A volume created without a size limit counts this much against its tenant's byte quota. */
export const VOLUME_DEFAULT_SIZE_BYTES = 1024 ** 3;
/** How many volumes one sandbox or job may mount. */
export const VOLUME_MAX_MOUNTS = 16;

export const VolumeCreateSchema = strictObject(
  {
    name: VolumeNameSchema,
    /** The most the volume may hold; enforced as docs/volumes.md says per backend. */
    sizeLimitBytes: z
      .number()
      .int('sizeLimitBytes must be an integer')
      .positive('sizeLimitBytes must be positive')
      .max(VOLUME_MAX_SIZE_BYTES, `sizeLimitBytes is at most ${VOLUME_MAX_SIZE_BYTES} (1 TiB)`)
      .optional(),
  },
  { size: 'did you mean "sizeLimitBytes"?', sizeBytes: 'did you mean "sizeLimitBytes"?' },
);
export type VolumeCreate = z.output<typeof VolumeCreateSchema>;
export type VolumeCreateInput = z.input<typeof VolumeCreateSchema>;

/**
 * Paths a volume may not be mounted at, or under: the system's, and `/shared`, where the agent
 * itself is mounted in a container or pod (a volume there would hide it).
 */
const RESERVED_MOUNT_PATHS = ['/shared', '/proc', '/sys', '/dev'];

const mountPath = z
  .string()
  .regex(/^\//, 'mountPath must be an absolute path')
  .max(1024, 'mountPath is at most 1024 characters')
  .refine((p) => !p.split('/').includes('..'), 'mountPath must not contain ".."')
  .refine((p) => p.replace(/\/+$/, '') !== '', 'mountPath must not be "/"')
  .refine(
    (p) => !RESERVED_MOUNT_PATHS.some((r) => p === r || p.startsWith(`${r}/`)),
    `mountPath must not be ${RESERVED_MOUNT_PATHS.join(', ')} or under them (the system's, and the agent's own mount)`,
  );

/** One volume a sandbox or job mounts. */
export const VolumeMountSchema = strictObject(
  {
    name: VolumeNameSchema,
    mountPath,
    /** Read-only mounts share a volume; a read-write one is exclusive of other writers. */
    readOnly: z.boolean().default(false),
  },
  {
    path: 'did you mean "mountPath"?',
    target: 'did you mean "mountPath"?',
    ro: 'did you mean "readOnly"?',
    volume: 'did you mean "name"?',
  },
);
export type VolumeMount = z.output<typeof VolumeMountSchema>;

export const VolumeMountsSchema = z
  .array(VolumeMountSchema)
  .max(VOLUME_MAX_MOUNTS, `a sandbox mounts at most ${VOLUME_MAX_MOUNTS} volumes`)
  .superRefine((mounts, ctx) => {
    const names = new Set<string>();
    const paths = new Set<string>();
    mounts.forEach((m, index) => {
      const path = m.mountPath.replace(/\/+$/, '');
      if (names.has(m.name))
        ctx.addIssue({
          code: 'custom',
          path: [index, 'name'],
          message: `volume "${m.name}" is mounted twice`,
        });
      if (paths.has(path))
        ctx.addIssue({ code: 'custom', path: [index, 'mountPath'], message: `${path} has two volumes` });
      names.add(m.name);
      paths.add(path);
    });
  })
  .default([]);

/** What the store keeps of a volume (the backend object is named by `uid`, never by the name). */
export const VolumeRecordSchema = z.object({
  name: VolumeNameSchema,
  tenant: z.string(),
  /** Random per creation: a volume deleted and created again under its name never sees old data. */
  uid: z.string().regex(/^[0-9a-f]{16}$/),
  sizeLimitBytes: z.number().int().positive().optional(),
  createdAt: z.string(),
});
export type VolumeRecord = z.infer<typeof VolumeRecordSchema>;

/** A volume as the SDK lists it: its record and who mounts it now. */
export interface VolumeInfo extends VolumeRecord {
  /** Sandboxes (job ids) mounting it, with how. */
  holders: { sandboxId: string; readOnly: boolean }[];
}

/** The name of a volume's backend object (Docker volume, PVC, in-process directory). */
export function volumeBackendName(uid: string): string {
  return `sandstream-vol-${uid}`;
}

/** A mount as the backend gets it (libs/sandbox SandboxSpec `volumes`). */
export interface ResolvedVolumeMount {
  /** volumeBackendName(uid). */
  source: string;
  /** The volume's name, for labels and messages. */
  volume: string;
  mountPath: string;
  readOnly: boolean;
  sizeLimitBytes?: number | undefined;
}
