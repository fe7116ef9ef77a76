import { createHash } from 'node:crypto';

/**
 * Names and label values Kubernetes accepts are narrower than job ids (which may contain ":" and
 * be 128 characters long). Everything here is a pure function of the job id, so any replica can
 * find a sandbox's objects again without remembering anything.
 */

const labelValuePattern = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const maxLabelValue = 63;

function shortHash(value: string, length: number): string {
  return createHash('sha256').update(value).digest('hex').slice(0, length);
}

/** Lower-case DNS-1123 characters only, trimmed of leading/trailing dashes. */
function slug(value: string, maxLength: number): string {
  return value
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, maxLength)
    .replace(/^-+|-+$/g, '');
}

/**
 * Pod name for a job: readable prefix plus a hash of the exact job id, so "Job:1" and "job-1"
 * (same slug) still get different pods. At most 63 characters, because the name is also used as
 * a label value and as the pod's hostname.
 */
export function sandboxPodName(jobId: string): string {
  const readable = slug(jobId, 40);
  return readable ? `sbx-${readable}-${shortHash(jobId, 10)}` : `sbx-${shortHash(jobId, 10)}`;
}

/** The job's deny-egress NetworkPolicy. */
export function egressPolicyName(podName: string): string {
  return `${podName}-egress`;
}

/** The job's own Secret holding a Redis URL with a per-sandbox password. */
export function redisUrlSecretName(podName: string): string {
  return `${podName}-redis`;
}

/**
 * A label value for an arbitrary string: unchanged when Kubernetes accepts it, otherwise a slug
 * plus hash (the exact value is kept in an annotation next to it).
 */
export function toLabelValue(value: string): string {
  if (value.length <= maxLabelValue && labelValuePattern.test(value)) return value;
  const readable = slug(value, 40);
  return readable ? `${readable}-${shortHash(value, 12)}` : shortHash(value, 12);
}
