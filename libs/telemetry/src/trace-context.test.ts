import { context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { useInMemoryTracing } from '@sandstream/test-support/vitest';
import { StepSchema } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { extractContext, injectTraceContext, withExtractedContext } from './trace-context.js';

const exporter = useInMemoryTracing();

describe('trace context helpers', () => {
  it('returns undefined outside any span', () => {
    expect(injectTraceContext()).toBeUndefined();
  });

  it('round-trips through a Step so a remote span becomes a child', async () => {
    const tracer = trace.getTracer('test');
    const parent = tracer.startSpan('submit');
    const tc = context.with(trace.setSpan(context.active(), parent), () => injectTraceContext());
    expect(tc?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);

    // It survives being serialised into a Step, as it would be on its way through Redis.
    const step = StepSchema.parse(
      JSON.parse(JSON.stringify({ schemaVersion: 1, stepId: 's1', command: 'true', traceContext: tc })),
    );
    await withExtractedContext(step.traceContext, async () => {
      // A timer turn on purpose: the extracted context must survive a macrotask boundary.
      await new Promise((r) => setTimeout(r, 1));
      tracer.startSpan('child').end();
    });
    parent.end();
    const [child] = exporter.getFinishedSpans().filter((s) => s.name === 'child');
    expect(child?.spanContext().traceId).toBe(parent.spanContext().traceId);
    expect(child?.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
  });

  it('keeps tracestate', () => {
    const ctx = extractContext({
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: 'vendor=abc',
    });
    expect(injectTraceContext(ctx)).toEqual({
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: 'vendor=abc',
    });
  });

  it('treats malformed or missing context as the root, never throwing', () => {
    for (const bad of [
      undefined,
      null,
      42,
      {},
      { traceparent: 'garbage' },
      { traceparent: 'x'.repeat(600) },
    ]) {
      expect(extractContext(bad)).toBe(ROOT_CONTEXT);
    }
    expect(withExtractedContext({ traceparent: 'nope' }, () => trace.getActiveSpan())).toBeUndefined();
  });
});
