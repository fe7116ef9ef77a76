import { z } from 'zod';
import { SchemaVersionSchema } from './schema-version.js';
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
});
export type ControlMessage = z.infer<typeof ControlMessageSchema>;
