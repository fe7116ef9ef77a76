import { createHash } from 'node:crypto';
import type { DeclaredPool, SandboxSpec } from '@sandstream/sandbox';

/** JSON with object keys sorted at every depth: the same spec always hashes the same. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}

/**
 * The version of a pool's members: its spec and its tenants. Members of another version are
 * neither claimed nor kept; an edit of the template therefore replaces them.
 */
export function poolSpecHash(pool: Pick<DeclaredPool, 'spec' | 'tenants'>): string {
  const text = JSON.stringify(canonical({ spec: pool.spec, tenants: pool.tenants }));
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/**
 * Fields of a spec that are only read while the agent runs its steps, or only describe the
 * sandbox, so a claim can bind them to a member that is already up. Everything else is fixed
 * when the container or pod is made. `startDeadlineSeconds` is the start's own budget;
 * `template` names the pool itself; `labels` are the sandbox's metadata (its record carries
 * the request's, for listing and filtering; a claimed member's container or pod keeps the
 * pool's). Annotations stay fixed: on Kubernetes some change what runs (sidecar injection,
 * AppArmor profiles).
 */
const LATE_BOUND = new Set(['env', 'startDeadlineSeconds', 'template', 'labels']);

export type PoolFit =
  | { fits: true; env: Record<string, string>; unsetEnv: string[] }
  | { fits: false; reason: string };

/**
 * Whether a request's spec can be served by a member made from `memberSpec`: every field but the
 * late-bound ones must be equal. When it fits, the environment the claim must bind: what the
 * request sets differently, and what the member has that the request does not.
 */
export function fitToPool(memberSpec: SandboxSpec, requested: SandboxSpec): PoolFit {
  const differing: string[] = [];
  const keys = new Set([...Object.keys(memberSpec), ...Object.keys(requested)]);
  for (const key of keys) {
    if (LATE_BOUND.has(key)) continue;
    const a = JSON.stringify(canonical(memberSpec[key as keyof SandboxSpec]));
    const b = JSON.stringify(canonical(requested[key as keyof SandboxSpec]));
    if (a !== b) differing.push(key);
  }
  if (differing.length > 0) return { fits: false, reason: `spec-differs: ${differing.sort().join(', ')}` };
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(requested.env)) {
    if (memberSpec.env[name] !== value) env[name] = value;
  }
  const unsetEnv = Object.keys(memberSpec.env).filter((name) => !(name in requested.env));
  return { fits: true, env, unsetEnv };
}
