/**
 * The machine-readable reasons a step result may carry next to its `errorMessage`: one list for
 * the schema (step-result.ts) and the zod-free checks (fast-result.ts, the CLI's lean exec).
 */
export const STEP_ERROR_CODES = [
  'invalid_step',
  'limit_exceeded',
  'not_found',
  'io_error',
  'spawn_failed',
  'timed_out',
  'cancelled',
  'sandbox_lost',
  'internal',
] as const;
