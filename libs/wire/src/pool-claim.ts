import * as z from 'zod';
import { JobIdSchema } from './keys.js';
import { TraceContextSchema } from './trace-context.js';

export * from './pool-claim-size.js';

const envName = z
  .string()
  .max(256)
  .regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/, 'environment variable names are letters, digits and _ . -');

/**
 * What pod-lifecycle pushes on a warm pool member's `claim` list: the identity the member's
 * agent takes on at once, in place of a boot. Everything the container or pod spec fixes (image,
 * resources, secrets, network, volumes) matched the request already; this is only what can be
 * bound late. Sizes are bounded: the member reads it before it is anyone's sandbox.
 */
export const PoolClaimSchema = z.strictObject({
  /** The job or live sandbox this member now serves: its keys are `sandbox:{jobId}:*`. */
  jobId: JobIdSchema,
  /**
   * The Redis user to reconnect as (the job's own, made with the member's password); absent when
   * sandboxes share the service credentials (no per-sandbox users).
   */
  username: z.string().min(1).max(256).optional(),
  /** The shared completion stream the agent notifies after each result. */
  notifyStream: z.string().min(1).max(1024).optional(),
  /** A live sandbox: the agent never leaves on its own idleness. */
  live: z.boolean().default(false),
  /** The request's environment where it differs from the member's: set for every command. */
  env: z.record(envName, z.string().max(128 * 1024)).default({}),
  /** Variables of the member's environment the request does not have. */
  unsetEnv: z.array(envName).max(1000).default([]),
  /** The start's trace context, for the agent's own spans. */
  traceContext: TraceContextSchema.optional(),
  /** When the claim was made (ms): the agent reports claim-to-bound time. */
  claimedAt: z.number().optional(),
});
export type PoolClaim = z.output<typeof PoolClaimSchema>;
export type PoolClaimInput = z.input<typeof PoolClaimSchema>;
