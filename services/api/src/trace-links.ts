import { type Link, type SpanContext, trace } from '@opentelemetry/api';
import { JobStore, type KeySpace, type RedisClient } from '@sandstream/bus';
import { extractContext } from '@sandstream/telemetry/trace-context';

/** Ids whose trace is remembered per replica; a job's trace context never changes. */
const CACHE_MAX = 10_000;

/**
 * The trace of an existing job or sandbox, for the span of a request on it (`GET /v1/jobs/{id}`,
 * an exec): each request stays one trace of its own, linked to the job's, so a trace backend
 * leads from the request to everything the job did and back. Read once per id and replica (the
 * spec's traceContext is written at submit and never changes); only asked for while a span is
 * recorded, so with telemetry off it costs nothing.
 */
export class TraceLinks {
  private readonly cache = new Map<string, SpanContext | null>();
  private readonly jobs: JobStore;

  constructor(ctx: { redis: RedisClient; keys: KeySpace }) {
    this.jobs = new JobStore({ redis: ctx.redis, keys: ctx.keys });
  }

  async linkTo(id: string): Promise<Link | undefined> {
    let spanContext = this.cache.get(id);
    if (spanContext === undefined) {
      const spec = await this.jobs.getSpec(id).catch(() => null);
      // An unknown id is not remembered: the job may be created by the next request.
      if (spec === null) return undefined;
      spanContext = trace.getSpanContext(extractContext(spec.traceContext)) ?? null;
      if (this.cache.size >= CACHE_MAX) this.cache.clear();
      this.cache.set(id, spanContext);
    }
    return spanContext ? { context: spanContext, attributes: { 'sandstream.link': 'job' } } : undefined;
  }
}
