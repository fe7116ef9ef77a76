import { type Context, context, ROOT_CONTEXT, type TextMapGetter, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { type TraceContext, TraceContextSchema } from '@sandstream/wire';

/*
 * An explicit W3C propagator instead of the global `propagation` API: the wire format is fixed
 * (traceparent / tracestate), so it must not change with whatever propagator a service or the
 * SDK happens to register globally, and it works even when telemetry is off.
 */
const propagator = new W3CTraceContextPropagator();

const getter: TextMapGetter<TraceContext> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    if (key === 'traceparent') return carrier.traceparent;
    if (key === 'tracestate') return carrier.tracestate;
    return undefined;
  },
};

/**
 * The active span's context in wire form, to put into a queue payload or a Step. Undefined when
 * no sampled-or-not span is active (telemetry off, or called outside any span), so callers can
 * spread it into payloads unconditionally.
 */
export function injectTraceContext(ctx: Context = context.active()): TraceContext | undefined {
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, {
    set: (c, k, v) => {
      c[k] = v;
    },
  });
  if (!carrier.traceparent) return undefined;
  return carrier.tracestate
    ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate }
    : { traceparent: carrier.traceparent };
}

/**
 * An OpenTelemetry Context whose parent span is the one described by `tc`. Missing or malformed
 * input (it crossed a trust boundary in Redis) yields the root context: a new trace starts
 * rather than the job failing.
 */
export function extractContext(tc: unknown, base: Context = ROOT_CONTEXT): Context {
  const parsed = TraceContextSchema.safeParse(tc);
  if (!parsed.success) return base;
  const extracted = propagator.extract(base, parsed.data, getter);
  return trace.getSpanContext(extracted) ? extracted : base;
}

/** Runs `fn` with `tc` as the active parent, so spans started inside join the remote trace. */
export function withExtractedContext<T>(tc: unknown, fn: () => T): T {
  return context.with(extractContext(tc), fn);
}
