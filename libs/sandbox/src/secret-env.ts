import type { SecretEnvRef } from './sandbox-spec.js';

/**
 * Resolves `spec.secretEnv` for backends without a secret store of their own (Docker,
 * in-process): `secretName` names an environment variable of the backend's own process (`key` only
 * means something to Kubernetes Secrets and is ignored here). The values go straight into the sandbox's environment and are never written to Redis.
 */
export function resolveSecretEnv(
  secretEnv: Record<string, SecretEnvRef>,
  source: Record<string, string | undefined> = process.env,
): Record<string, string> {
  const resolved: Record<string, string> = {};
  const missing: string[] = [];
  for (const [name, ref] of Object.entries(secretEnv)) {
    const value = source[ref.secretName];
    if (value === undefined) {
      missing.push(
        `secretEnv.${name}: environment variable ${ref.secretName} is not set in the backend process`,
      );
      continue;
    }
    resolved[name] = value;
  }
  if (missing.length > 0) throw new Error(missing.join('; '));
  return resolved;
}
