import { trace } from '@opentelemetry/api';
import { useInMemoryTracing } from '@sandstream/test-support/vitest';
import { describe, expect, it } from 'vitest';
import { planChildSpan, plannedSpanIdGenerator, recordPlannedSpan } from './planned-span.js';
import { withSpan } from './spans.js';

const exporter = useInMemoryTracing({ idGenerator: plannedSpanIdGenerator });

describe('planned spans', () => {
  it('records, later and outside any context, a span with the planned id under the planning span', async () => {
    let planned: ReturnType<typeof planChildSpan>;
    let parent: { traceId: string; spanId: string } | undefined;
    await withSpan('dispatch', {}, async (span) => {
      parent = span.spanContext();
      planned = planChildSpan();
    });
    expect(planned?.traceparent).toMatch(new RegExp(`^00-${parent?.traceId}-[0-9a-f]{16}-01$`));
    const plannedId = planned!.traceparent.split('-')[2];

    // Some other span in between must not steal the planned id.
    trace.getTracer('x').startSpan('unrelated').end();
    const start = Date.now() - 1500;
    const end = Date.now();
    expect(
      recordPlannedSpan(planned, {
        name: 'dispatcher.step',
        startTime: start,
        endTime: end,
        attributes: { 'process.exit.code': 4 },
        error: 'exit code 4',
      }),
    ).toBe(true);

    const span = exporter.getFinishedSpans().find((s) => s.name === 'dispatcher.step');
    expect(span?.spanContext().spanId).toBe(plannedId);
    expect(span?.spanContext().traceId).toBe(parent?.traceId);
    expect(span?.parentSpanContext?.spanId).toBe(parent?.spanId);
    expect(span?.status).toEqual({ code: 2, message: 'exit code 4' });
    expect(span?.attributes['process.exit.code']).toBe(4);
    // Explicit times: the span covers the work, not the moment it was recorded.
    expect(span?.startTime[0]).toBe(Math.floor(start / 1000));
    expect(span?.endTime[0]).toBe(Math.floor(end / 1000));
    // Our tracestate key does not leak into the recorded span.
    expect(span?.spanContext().traceState?.get('sandstream')).toBeUndefined();
  });

  it('plans nothing without an active span, and records nothing for unplanned or unsampled contexts', () => {
    expect(planChildSpan()).toBeUndefined();
    const before = exporter.getFinishedSpans().length;
    const rec = { name: 'x', startTime: Date.now(), endTime: Date.now() };
    expect(recordPlannedSpan(undefined, rec)).toBe(false);
    expect(recordPlannedSpan({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` }, rec)).toBe(false);
    expect(
      recordPlannedSpan(
        {
          traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-00`,
          tracestate: `sandstream=${'c'.repeat(16)}`,
        },
        rec,
      ),
    ).toBe(false);
    expect(recordPlannedSpan({ traceparent: 'garbage', tracestate: 'sandstream=x' }, rec)).toBe(false);
    expect(exporter.getFinishedSpans().length).toBe(before);
  });
});
