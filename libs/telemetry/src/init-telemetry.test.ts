import { trace } from '@opentelemetry/api';
import { type OtlpReceiver, startOtlpReceiver } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTelemetry, type Telemetry, tracingEnabled } from './init-telemetry.js';
import { withExtractedContext } from './trace-context.js';

let receiver: OtlpReceiver;
let telemetry: Telemetry;
const saved = { ...process.env };

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // The SDK reads these from process.env; a long batch delay leaves the flush to shutdown().
  Object.assign(process.env, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '60000',
    OTEL_METRICS_EXPORTER: 'none',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0',
  });
  telemetry = await initTelemetry({ serviceName: 'init-test' });
});
afterAll(async () => {
  await telemetry.shutdown();
  await receiver.close();
  process.env = saved;
});

describe('initTelemetry', () => {
  it('is on with an endpoint, honours OTEL_TRACES_SAMPLER, and flushes on shutdown', async () => {
    expect(telemetry.config.otlp).toBe(true);
    expect(tracingEnabled()).toBe(true);
    const tracer = trace.getTracer('t');
    // Ratio 0: a new root is not sampled …
    tracer.startSpan('root-dropped').end();
    // … but a child of a sampled remote parent follows the parent (parent-based).
    const parent = '00-11111111111111111111111111111111-2222222222222222-01';
    withExtractedContext({ traceparent: parent }, () => tracer.startSpan('child-kept').end());

    expect(receiver.spans).toHaveLength(0); // still batched
    await telemetry.shutdown();
    await telemetry.shutdown(); // idempotent
    expect(tracingEnabled()).toBe(false);
    expect(receiver.spans.map((s) => s.name)).toEqual(['child-kept']);
    expect(receiver.spans[0]).toMatchObject({
      service: 'init-test',
      traceId: '11111111111111111111111111111111',
      parentSpanId: '2222222222222222',
      encoding: 'protobuf',
    });
  });
});
