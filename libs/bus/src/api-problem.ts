import { z } from 'zod';

/**
 * An error of the HTTP API as RFC 9457 problem details (`application/problem+json`): a stable
 * `type` per kind of problem, the HTTP status, a `detail` worded as the CLI words it, and for a
 * refused request every broken rule with the field it concerns. One definition for both ends:
 * services/api writes it (and documents it in its OpenAPI), the SDK's HTTP transport reads it
 * back into its own error classes.
 */
const PROBLEM_TYPE_PREFIX = 'urn:sandstream:problem:';

/** A problem's `type` for its kind (`not-found` → `urn:sandstream:problem:not-found`). */
export const problemType = (kind: string): string => `${PROBLEM_TYPE_PREFIX}${kind}`;

/** The kind a problem's `type` names (the type itself when it is not one of ours). */
export const problemKind = (type: string): string =>
  type.startsWith(PROBLEM_TYPE_PREFIX) ? type.slice(PROBLEM_TYPE_PREFIX.length) : type;

/**
 * Kinds both ends must agree on beyond the error classes' own (services/api problem.ts writes
 * them, the SDK's problem-errors.ts reads them back by kind).
 */
export const ProblemKinds = {
  /**
   * 503: Sandstream's infrastructure (Redis) did not answer; nothing was decided and the
   * request may be sent again after Retry-After. The SDK's InfrastructureUnavailableError.
   */
  infrastructureUnavailable: 'infrastructure-unavailable',
} as const;

export const ApiProblemSchema = z.object({
  type: z.string().describe(problemType('<kind>')),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  instance: z.string().optional(),
  errors: z
    .array(z.object({ field: z.string(), rule: z.string() }))
    .optional()
    .describe('each broken rule of a refused request, with the field it concerns'),
});
export type ApiProblem = z.infer<typeof ApiProblemSchema>;
