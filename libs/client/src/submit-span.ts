import { type Attributes, context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { type JobSpec, parseJobSpec } from '@sandstream/bus';
// The subpath, not the package root: the root also loads the OpenTelemetry SDK (~0.5 s), which
// an SDK user who never turns telemetry on should not pay for.
import { extractContext, injectTraceContext } from '@sandstream/telemetry/trace-context';

/**
 * The root of a job's trace: the `sandstream.submit` span around one submission. Only the
 * OpenTelemetry API is used, so with no SDK registered (telemetry off, the default for SDK
 * users) the tracer is a no-op and this costs one parse of the spec.
 *
 * A `traceContext` the caller put into the spec becomes this span's parent (the caller's own
 * trace continues), and the spec is handed on with this span's context instead, so the
 * scheduler's span is a child of the submit span. With no span being recorded and nothing to
 * inject, the caller's context is kept as it was.
 */
export async function withSubmitSpan<T extends { jobId: string; created: boolean }>(
  input: unknown,
  source: string | undefined,
  submit: (spec: JobSpec) => Promise<T>,
): Promise<T> {
  const callerContext =
    input && typeof input === 'object' ? (input as { traceContext?: unknown }).traceContext : undefined;
  const parent = callerContext === undefined ? context.active() : extractContext(callerContext);
  const tracer = trace.getTracer('sandstream-client');
  const span = tracer.startSpan('sandstream.submit', { kind: SpanKind.PRODUCER }, parent);
  try {
    // Parsed here (the only parse) so that a refused spec is an error on the span and the
    // attributes come from the validated spec, not from raw input.
    const spec = parseJobSpec(input, source);
    span.setAttributes(specAttributes(spec));
    const traceContext = injectTraceContext(trace.setSpan(parent, span)) ?? spec.traceContext;
    const result = await submit({ ...spec, ...(traceContext ? { traceContext } : {}) });
    span.setAttributes({ 'sandstream.job.id': result.jobId, 'sandstream.job.created': result.created });
    return result;
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

function specAttributes(spec: JobSpec): Attributes {
  const attributes: Attributes = {
    'sandstream.tenant': spec.tenant,
    'sandstream.job.step_count': spec.steps.length,
  };
  if (spec.id !== undefined) attributes['sandstream.job.id'] = spec.id;
  if (spec.image !== undefined) attributes['container.image.name'] = spec.image;
  if (spec.template !== undefined) attributes['sandstream.job.template'] = spec.template;
  return attributes;
}
