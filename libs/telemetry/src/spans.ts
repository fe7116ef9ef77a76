import {
  type Attributes,
  context,
  type Link,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { extractContext } from './trace-context.js';

const tracer = () => trace.getTracer('sandstream');

export interface SpanOptions {
  attributes?: Attributes;
  kind?: SpanKind;
  links?: Link[];
}

/**
 * Runs `fn` inside a new child span of the active one. A thrown error marks the span as failed
 * (and is rethrown); the span always ends, so callers cannot leak open spans on error paths.
 */
export async function withSpan<T>(
  name: string,
  options: SpanOptions,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return tracer().startActiveSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes, links: options.links },
    async (span) => {
      try {
        return await fn(span);
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

export interface JobSpanOptions extends SpanOptions {
  /** The TraceContext carried by the queue payload (the job's root); anything invalid starts a new trace. */
  traceContext: unknown;
  /** 1-based delivery count (BullMQ: job.attemptsMade + 1). */
  attempt?: number;
  /** Span of an earlier delivery of the same work, when known: linked, never parented. */
  previousAttempt?: unknown;
}

/**
 * One consumer span per delivery of a queued job. Every attempt is a child of the context the
 * producer put into the payload, so a retried or delayed job stays in its trace as siblings
 * under the same parent instead of a chain that deepens with each retry. Earlier attempts are
 * referenced with a span link. Producers that re-enqueue must pass on the payload's original
 * traceContext, not the current span's, for the same reason.
 */
export function withJobSpan<T>(
  name: string,
  options: JobSpanOptions,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = extractContext(options.traceContext);
  const links = [...(options.links ?? [])];
  const previous = trace.getSpanContext(extractContext(options.previousAttempt));
  if (previous) links.push({ context: previous, attributes: { 'sandstream.link': 'previous_attempt' } });
  const attributes: Attributes = { ...options.attributes };
  if (options.attempt !== undefined) attributes['sandstream.job.attempt'] = options.attempt;
  return context.with(parent, () =>
    withSpan(name, { kind: options.kind ?? SpanKind.CONSUMER, attributes, links }, fn),
  );
}
