import * as z from 'zod';
import { SCHEMA_VERSION, SchemaVersionSchema } from './schema-version.js';
import { StepIdSchema } from './step.js';

/**
 * Messages on `sandbox:{jobId}:control`. A cancel names the step it means, so a cancel that
 * arrives after its step finished can never kill the next one.
 */
export const ControlMessageSchema = z.object({
  schemaVersion: SchemaVersionSchema,
  kind: z.literal('cancel'),
  stepId: StepIdSchema,
  reason: z.string().max(1024).optional(),
  /**
   * The first signal the step's process group gets (default SIGTERM); SIGKILL follows after the
   * agent's grace whatever it was, so a cancel always ends the step.
   */
  signal: z.enum(['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGKILL', 'SIGUSR1', 'SIGUSR2']).optional(),
});
export type ControlMessage = z.infer<typeof ControlMessageSchema>;

/**
 * The one encoder of a cancel for `sandbox:{jobId}:control`, for every sender (the dispatcher's
 * scripts receive its output instead of building JSON in Lua). The reason is cut to the
 * schema's limit rather than refused: a long operator message must not stop a cancel.
 */
export function encodeCancel(stepId: string, reason?: string, signal?: ControlMessage['signal']): string {
  const message: ControlMessage = ControlMessageSchema.parse({
    schemaVersion: SCHEMA_VERSION,
    kind: 'cancel',
    stepId,
    ...(reason === undefined ? {} : { reason: reason.slice(0, 1024) }),
    ...(signal === undefined ? {} : { signal }),
  });
  return JSON.stringify(message);
}
