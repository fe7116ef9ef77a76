import {
  type Attributes,
  ROOT_CONTEXT,
  type SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { type IdGenerator, RandomIdGenerator } from '@opentelemetry/sdk-trace-base';
import type { TraceContext } from '@sandstream/wire';

/*
 * Planned spans: a span whose id is chosen *before* the work starts and which is recorded
 * *after* it ends, possibly by another process. The step-dispatcher needs this: a step's Step
 * JSON (carrying its traceContext for the agent) is written to Redis when the job is
 * dispatched, the step is pushed later by a Lua script, and its completion may be handled by any
 * dispatcher replica. No process holds a live span object across that; instead the span id is
 * planned up front, travels in the Step, and whoever sees the completion records the span with
 * that id, so the agent's span (whose parent is that id) nests under it.
 *
 * The parent span id rides in the W3C `tracestate` under our own key, so recording needs no
 * state besides the Step's traceContext.
 */
const STATE_KEY = 'sandstream';
const random = new RandomIdGenerator();
let presetSpanId: string | undefined;

/**
 * The SDK's id generator, with a one-shot override used only inside recordPlannedSpan. The
 * override is set and consumed synchronously around a single startSpan call, so no other span
 * can pick it up. initTelemetry installs it; another provider simply ignores planned ids.
 */
export const plannedSpanIdGenerator: IdGenerator = {
  generateTraceId: () => random.generateTraceId(),
  generateSpanId: () => {
    const id = presetSpanId;
    presetSpanId = undefined;
    return id ?? random.generateSpanId();
  },
};

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * Plans a child of the active span: returns the TraceContext to hand to the work (a Step), or
 * undefined when no span is active (telemetry off), in which case callers keep what they had.
 */
export function planChildSpan(): TraceContext | undefined {
  const parent = trace.getActiveSpan()?.spanContext();
  if (!parent || !trace.isSpanContextValid(parent)) return undefined;
  const spanId = random.generateSpanId();
  const flags = `0${(parent.traceFlags & TraceFlags.SAMPLED).toString(16)}`.slice(-2);
  const state = (parent.traceState ?? new TraceState()).set(STATE_KEY, parent.spanId);
  return { traceparent: `00-${parent.traceId}-${spanId}-${flags}`, tracestate: state.serialize() };
}

export interface PlannedSpanRecord {
  name: string;
  /** Epoch milliseconds. */
  startTime: number;
  endTime: number;
  kind?: SpanKind;
  attributes?: Attributes;
  /** Marks the span failed with this message. */
  error?: string;
}

/**
 * Records the span planned by planChildSpan(). A context that was not planned (no parent in
 * tracestate), malformed, or unsampled records nothing. Returns whether the span was recorded
 * under its planned id.
 */
export function recordPlannedSpan(tc: TraceContext | undefined, record: PlannedSpanRecord): boolean {
  const match = tc ? TRACEPARENT.exec(tc.traceparent) : null;
  if (!match || !tc?.tracestate) return false;
  const [, traceId, spanId, flags] = match as unknown as [string, string, string, string];
  let state: TraceState;
  try {
    state = new TraceState(tc.tracestate);
  } catch {
    return false;
  }
  const parentSpanId = state.get(STATE_KEY);
  const traceFlags = Number.parseInt(flags, 16) & TraceFlags.SAMPLED;
  if (!parentSpanId || !/^[0-9a-f]{16}$/.test(parentSpanId) || traceFlags !== TraceFlags.SAMPLED)
    return false;
  const parent = trace.setSpanContext(ROOT_CONTEXT, {
    traceId,
    spanId: parentSpanId,
    traceFlags,
    isRemote: true,
    traceState: state.unset(STATE_KEY),
  });
  presetSpanId = spanId;
  let span: ReturnType<ReturnType<typeof trace.getTracer>['startSpan']>;
  try {
    span = trace
      .getTracer('sandstream')
      .startSpan(
        record.name,
        { kind: record.kind, attributes: record.attributes, startTime: record.startTime },
        parent,
      );
  } finally {
    presetSpanId = undefined;
  }
  if (record.error) span.setStatus({ code: SpanStatusCode.ERROR, message: record.error });
  span.end(record.endTime);
  // False when the registered provider does not use plannedSpanIdGenerator (telemetry off).
  return span.spanContext().spanId === spanId;
}
