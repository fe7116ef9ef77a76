import { SandboxLabels } from '../backend.js';
import { toLabelValue } from './kube-names.js';

/** Selects one sandbox's pod; the NetworkPolicy uses it. */
export const SANDBOX_POD_LABEL = 'sandstream.dev/sandbox';

/**
 * Exact job id and tenant: label values are limited to 63 characters of a narrower alphabet, so
 * the labels may hold a slug-and-hash while these annotations keep the real values.
 */
export const SandboxAnnotations = {
  jobId: 'sandstream.dev/job-id',
  tenant: 'sandstream.dev/tenant',
} as const;

export const MANAGED_SELECTOR = `${SandboxLabels.managedBy}=${SandboxLabels.managedByValue}`;

/** Labels the backend finds and cleans up its objects by; templates and specs cannot override them. */
export function identityLabels(jobId: string, tenant: string): Record<string, string> {
  return {
    [SandboxLabels.managedBy]: SandboxLabels.managedByValue,
    [SandboxLabels.jobId]: toLabelValue(jobId),
    [SandboxLabels.tenant]: toLabelValue(tenant),
  };
}

export function identityAnnotations(jobId: string, tenant: string): Record<string, string> {
  return { [SandboxAnnotations.jobId]: jobId, [SandboxAnnotations.tenant]: tenant };
}
