import { createHash } from 'node:crypto';

/**
 * Container and volume names for a job. Job ids may hold ':' which Docker names do not allow, so
 * the id is sanitised and a short hash of the original keeps "a:b" and "a_b" apart.
 */
export function dockerJobBaseName(jobId: string): string {
  const safe = jobId.replace(/[^a-zA-Z0-9_.-]/g, '_').slice(0, 100);
  const hash = createHash('sha256').update(jobId).digest('hex').slice(0, 8);
  return `sandstream-${safe}-${hash}`;
}

export function dockerJobNames(jobId: string) {
  const base = dockerJobBaseName(jobId);
  return {
    toolchain: base,
    carrier: `${base}-carrier`,
    sharedVolume: `${base}-shared`,
    workVolume: `${base}-work`,
  };
}

/** A persistent workspace is named by the spec, not the job, so the next job finds it. */
export function persistentVolumeName(name: string): string {
  return `sandstream-workspace-${name}`;
}

/** What each labelled object is, so destroy and the reaper can tell them apart. */
export const DockerRoleLabel = 'sandstream.dev/role';
export type DockerRole = 'toolchain' | 'carrier' | 'shared' | 'work' | 'workspace' | 'volume';
/** On a tenant's volume (role `volume`): its name as the tenant knows it. */
export const VolumeNameLabel = 'sandstream.dev/volume';
export const PersistentLabel = 'sandstream.dev/persistent-workspace';
