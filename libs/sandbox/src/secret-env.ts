import type { SecretEnvRef } from './sandbox-spec.js';

/** Backends without a secret store read secrets only from variables with this prefix. */
export const SECRET_VARIABLE_PREFIX = 'SANDSTREAM_SECRET_';

/**
 * The environment variable of the backend's process that holds secret `secretName` on Docker and
 * in-process: `SANDSTREAM_SECRET_` + the name in upper case, other characters as `_`
 * (`git-token` → `SANDSTREAM_SECRET_GIT_TOKEN`). Only such variables can be reached, so a secret
 * name can never point at the service's own configuration (its Redis credentials among them).
 */
export function secretEnvVariable(secretName: string): string {
  return `${SECRET_VARIABLE_PREFIX}${secretName.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/**
 * Resolves `spec.secretEnv` for backends without a secret store of their own (Docker,
 * in-process) from the `SANDSTREAM_SECRET_*` variables of the backend's own process (`key` only
 * means something to Kubernetes Secrets and is ignored here). The values go straight into the
 * sandbox's environment and are never written to Redis.
 */
export function resolveSecretEnv(
  secretEnv: Record<string, SecretEnvRef>,
  source: Record<string, string | undefined> = process.env,
): Record<string, string> {
  const resolved: Record<string, string> = {};
  const missing: string[] = [];
  for (const [name, ref] of Object.entries(secretEnv)) {
    const variable = secretEnvVariable(ref.secretName);
    const value = source[variable];
    if (value === undefined) {
      missing.push(
        `secretEnv.${name}: secret "${ref.secretName}" is not set (the backend process reads it from ${variable})`,
      );
      continue;
    }
    resolved[name] = value;
  }
  if (missing.length > 0) throw new Error(missing.join('; '));
  return resolved;
}
