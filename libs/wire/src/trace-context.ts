import * as z from 'zod';

/**
 * W3C trace context (https://www.w3.org/TR/trace-context/) carried by a Step or a queue payload,
 * so that the agent's span for a step joins the job's trace. Both fields are the exact header
 * values; a malformed traceparent is dropped by the reader rather than failing the step.
 */
export const TraceContextSchema = z.object({
  traceparent: z.string().max(512),
  tracestate: z.string().max(1024).optional(),
});
export type TraceContext = z.infer<typeof TraceContextSchema>;
