import { z } from 'zod';
import { SandboxStartError } from './backend.js';
import { cpuToNanoCpus, memoryToBytes } from './quantity.js';
import { cpuQuantity, memoryQuantity, type SandboxSpec } from './sandbox-spec.js';

const blank = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const pidsVar = (name: string, fallback: number) =>
  z.preprocess(
    blank,
    z.coerce
      .number({ error: `${name} must be a whole number of processes` })
      .int(`${name} must be a whole number of processes`)
      .min(16, `${name} must be at least 16 (the agent alone runs about a dozen threads)`)
      .max(4_194_304, `${name} must be at most 4194304 (the kernel's pid_max ceiling)`)
      .default(fallback),
  );
const cpuVar = (fallback: string) => z.preprocess(blank, cpuQuantity.default(fallback));
const memoryVar = (fallback: string) => z.preprocess(blank, memoryQuantity.default(fallback));

/**
 * The operator's limits for every sandbox, from the environment of the service that creates them
 * (pod-lifecycle). Defaults apply where a spec sets no limit, so no sandbox runs unbounded; the
 * maxima cap what a template or a request may raise them to. Swap is not a setting: a sandbox
 * gets none beyond its memory limit (Docker would otherwise allow as much again in swap).
 */
export const ResourcePolicyEnvSchema = z.object({
  SANDBOX_DEFAULT_CPU: cpuVar('1'),
  SANDBOX_DEFAULT_MEMORY: memoryVar('1Gi'),
  SANDBOX_DEFAULT_PIDS: pidsVar('SANDBOX_DEFAULT_PIDS', 512),
  SANDBOX_MAX_CPU: cpuVar('4'),
  SANDBOX_MAX_MEMORY: memoryVar('8Gi'),
  SANDBOX_MAX_PIDS: pidsVar('SANDBOX_MAX_PIDS', 4096),
  // Seed 003's MaxTotalSize is 100 MB for an in-memory tree; a real image's `npm install` needs more.
  SANDBOX_DEFAULT_DISK: memoryVar('10Gi'),
  SANDBOX_MAX_DISK: memoryVar('100Gi'),
});
export type ResourcePolicyEnv = z.output<typeof ResourcePolicyEnvSchema>;

const ResourceBoundsSchema = z.object({
  cpu: cpuQuantity,
  memory: memoryQuantity,
  pids: z.number().int().min(16),
  disk: memoryQuantity,
});
export type ResourceBounds = z.output<typeof ResourceBoundsSchema>;
/** What a backend enforces: `defaults` fill unset limits, `maxima` refuse larger ones. */
export const ResourcePolicySchema = z.object({
  defaults: ResourceBoundsSchema,
  maxima: ResourceBoundsSchema,
});
export type ResourcePolicy = z.output<typeof ResourcePolicySchema>;

type Field = keyof ResourceBounds;
const envName = {
  defaults: {
    cpu: 'SANDBOX_DEFAULT_CPU',
    memory: 'SANDBOX_DEFAULT_MEMORY',
    pids: 'SANDBOX_DEFAULT_PIDS',
    disk: 'SANDBOX_DEFAULT_DISK',
  },
  maxima: {
    cpu: 'SANDBOX_MAX_CPU',
    memory: 'SANDBOX_MAX_MEMORY',
    pids: 'SANDBOX_MAX_PIDS',
    disk: 'SANDBOX_MAX_DISK',
  },
} as const;

/** Comparable magnitudes: nano-cores, bytes, processes. */
const magnitude: Record<Field, (v: string | number) => number> = {
  cpu: (v) => cpuToNanoCpus(String(v)),
  memory: (v) => memoryToBytes(String(v)),
  pids: (v) => Number(v),
  disk: (v) => memoryToBytes(String(v)),
};

/** A spec, template or request asking for more than the operator allows. */
export class ResourceLimitError extends Error {
  override readonly name = 'ResourceLimitError';
}

export function resourcePolicyFromEnv(env: Record<string, string | undefined>): ResourcePolicy {
  const parsed = ResourcePolicyEnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  }
  return resourcePolicyOf(parsed.data);
}

/** The policy from already-parsed settings (a service's env schema extends ResourcePolicyEnvSchema). */
export function resourcePolicyOf(e: ResourcePolicyEnv): ResourcePolicy {
  return checkPolicy({
    defaults: {
      cpu: e.SANDBOX_DEFAULT_CPU,
      memory: e.SANDBOX_DEFAULT_MEMORY,
      pids: e.SANDBOX_DEFAULT_PIDS,
      disk: e.SANDBOX_DEFAULT_DISK,
    },
    maxima: {
      cpu: e.SANDBOX_MAX_CPU,
      memory: e.SANDBOX_MAX_MEMORY,
      pids: e.SANDBOX_MAX_PIDS,
      disk: e.SANDBOX_MAX_DISK,
    },
  });
}

/** The built-in policy (the env schema's defaults), for backends built without one. */
export const DEFAULT_RESOURCE_POLICY: ResourcePolicy = resourcePolicyFromEnv({});

/** A default above its maximum would refuse every sandbox that sets nothing: refused at start instead. */
export function checkPolicy(policy: ResourcePolicy): ResourcePolicy {
  for (const field of ['cpu', 'memory', 'pids', 'disk'] as const) {
    if (magnitude[field](policy.defaults[field]) > magnitude[field](policy.maxima[field])) {
      throw new Error(
        `${envName.defaults[field]}=${policy.defaults[field]} is above ${envName.maxima[field]}=${policy.maxima[field]}`,
      );
    }
  }
  return policy;
}

/**
 * The spec with every limit set: the spec's own where it has one, else the operator default (or
 * the spec's request when that is higher, since a limit below the request is invalid). Throws
 * ResourceLimitError naming the field and the maximum when a request or limit is above it.
 */
export function applyResourcePolicy(spec: SandboxSpec, policy: ResourcePolicy): SandboxSpec {
  const requests = spec.resources.requests ?? {};
  const limits = spec.resources.limits ?? {};
  const over = (field: Field, where: 'requests' | 'limits', value: string | number | undefined) => {
    if (value === undefined || magnitude[field](value) <= magnitude[field](policy.maxima[field])) return;
    throw new ResourceLimitError(
      `resources.${where}.${field === 'disk' ? 'ephemeralStorage' : field} ${JSON.stringify(value)} is above the operator maximum ` +
        `${policy.maxima[field]} (${envName.maxima[field]})`,
    );
  };
  over('cpu', 'requests', requests.cpu);
  over('memory', 'requests', requests.memory);
  over('cpu', 'limits', limits.cpu);
  over('memory', 'limits', limits.memory);
  over('pids', 'limits', limits.pids);
  over('disk', 'requests', requests.ephemeralStorage);
  over('disk', 'limits', limits.ephemeralStorage);
  const atLeastRequest = (field: 'cpu' | 'memory' | 'disk') => {
    const request = field === 'disk' ? requests.ephemeralStorage : requests[field];
    const fallback = policy.defaults[field];
    return request !== undefined && magnitude[field](request) > magnitude[field](fallback)
      ? request
      : fallback;
  };
  return {
    ...spec,
    resources: {
      ...spec.resources,
      limits: {
        cpu: limits.cpu ?? atLeastRequest('cpu'),
        memory: limits.memory ?? atLeastRequest('memory'),
        pids: limits.pids ?? policy.defaults.pids,
        ephemeralStorage: limits.ephemeralStorage ?? atLeastRequest('disk'),
      },
    },
  };
}

/** applyResourcePolicy for a backend's create: a refusal is a start failure that no retry fixes. */
export function withResourcePolicy(spec: SandboxSpec, policy = DEFAULT_RESOURCE_POLICY): SandboxSpec {
  try {
    return applyResourcePolicy(spec, policy);
  } catch (err) {
    if (err instanceof ResourceLimitError) throw new SandboxStartError('resource_limit', err.message);
    throw err;
  }
}
