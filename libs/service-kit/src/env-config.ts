import { z } from 'zod';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly service: string,
    readonly problems: string[],
  ) {
    super(`${service}: invalid configuration: ${problems.join('; ')}`);
  }
}

/**
 * Validates a service's environment with its zod schema. Every problem names the variable and
 * the rule ("SCHEDULER_GLOBAL_SLOTS: must be at least 1"), all at once, so an operator fixes a
 * deployment in one go instead of one crash per variable. Empty strings count as unset.
 */
export function loadEnvConfig<S extends z.ZodType>(
  service: string,
  schema: S,
  env: Record<string, string | undefined> = process.env,
): z.output<S> {
  const cleaned: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && value.trim() !== '') cleaned[key] = value;
  }
  const parsed = schema.safeParse(cleaned);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    service,
    parsed.error.issues.map((issue) => `${issue.path.map(String).join('.') || '(env)'}: ${issue.message}`),
  );
}

/** An integer environment variable with bounds that appear in the error message. */
export function intVar(min: number, max: number, fallback: number) {
  return z.coerce
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(min, `must be at least ${min}`)
    .max(max, `must be at most ${max}`)
    .default(fallback);
}

/** A TCP port; 0 picks a free one (tests). */
export const portVar = (fallback: number) => intVar(0, 65535, fallback);
