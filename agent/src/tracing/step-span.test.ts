import { type AddressInfo, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { type OtlpReceiver, startOtlpReceiver } from '@sandstream/test-support';
import { StepSchema } from '@sandstream/wire';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { executeStep } from '../steps/execute-step.js';
import { recordingContext } from '../steps/recording-context.js';
import { OtlpSpanExporter } from './otlp-span-exporter.js';
import { createStepTracer, stepTracerFromEnv } from './step-span.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const traced = (flags = '01') => ({
  traceparent: `00-${TRACE_ID}-${PARENT_ID}-${flags}`,
  tracestate: 'ss=1',
});
const runStep = (stepId: string, command: string, extra: Record<string, unknown> = {}) =>
  StepSchema.parse({ schemaVersion: 1, stepId, command, shell: true, ...extra });

let receiver: OtlpReceiver;
beforeEach(async () => {
  receiver = await startOtlpReceiver();
});
afterEach(async () => {
  await receiver.close();
});

describe('agent step spans', () => {
  it('records a failing and a passing step as children of the step traceContext', async () => {
    const tracer = stepTracerFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/` }, 'job-span-1');
    expect(tracer.enabled).toBe(true);
    const execute = tracer.wrap(executeStep);
    const { ctx } = recordingContext(tmpdir());

    const bad = await execute(runStep('s-bad', 'echo oops >&2; exit 3', { traceContext: traced() }), ctx);
    const good = await execute(runStep('s-good', 'true', { traceContext: traced() }), ctx);
    expect(bad.exitCode).toBe(3);
    expect(good.exitCode).toBe(0);
    await tracer.flush();

    const spans = await receiver.waitFor((s) => s.length === 2);
    // Both steps went out in one batch, as JSON.
    expect(receiver.requests.traces).toBe(1);
    const failed = spans.find((s) => s.attributes['sandstream.step.id'] === 's-bad');
    const passed = spans.find((s) => s.attributes['sandstream.step.id'] === 's-good');
    expect(failed).toMatchObject({
      traceId: TRACE_ID,
      parentSpanId: PARENT_ID,
      name: 'agent.step run',
      service: 'sandstream-agent',
      encoding: 'json',
      status: { code: 'error', message: 'exit code 3' },
      attributes: {
        'sandstream.job.id': 'job-span-1',
        'sandstream.step.kind': 'run',
        'process.executable.name': 'echo oops >&2; exit 3',
        'process.exit.code': 3,
      },
    });
    expect(passed).toMatchObject({ traceId: TRACE_ID, parentSpanId: PARENT_ID, status: { code: 'ok' } });
    expect(passed?.attributes['process.exit.code']).toBe(0);
    expect(failed?.spanId).not.toBe(passed?.spanId);
    // The span covers the process run.
    for (const s of spans) expect(s.endTimeUnixNano).toBeGreaterThan(s.startTimeUnixNano);
  });

  it('stamps spans on the wall clock other processes read, never before a Date.now() taken earlier', async () => {
    const tracer = stepTracerFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, 'job-span-clock');
    // The inner executor does nothing: what is checked is when the tracer says the step started.
    const execute = tracer.wrap(async () => ({ exitCode: 0, timedOut: false, errorMessage: null }));
    const { ctx } = recordingContext(tmpdir());
    const before = new Map<string, number>();
    // Spread over the millisecond: a clock anchored on whole milliseconds reads early in most of them.
    for (let i = 0; i < 30; i++) {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
      before.set(`c${i}`, Date.now());
      await execute(runStep(`c${i}`, 'true', { traceContext: traced() }), ctx);
    }
    await tracer.flush();
    const spans = await receiver.waitFor((s) => s.length === 30);
    for (const span of spans) {
      const earliest =
        BigInt(before.get(String(span.attributes['sandstream.step.id'])) as number) * 1_000_000n;
      expect(BigInt(span.startTimeUnixNano)).toBeGreaterThanOrEqual(earliest);
    }
  });

  it('records nothing for untraced or unsampled steps, and still runs them', async () => {
    const tracer = stepTracerFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }, 'job-span-2');
    const execute = tracer.wrap(executeStep);
    const { ctx, text } = recordingContext(tmpdir());
    await execute(runStep('a', 'echo one'), ctx);
    await execute(runStep('b', 'echo two', { traceContext: traced('00') }), ctx);
    await execute(runStep('c', 'echo three', { traceContext: { traceparent: 'junk' } }), ctx);
    await tracer.flush();
    expect(text('stdout')).toEqual(['one', 'two', 'three']);
    expect(receiver.requests.traces).toBe(0);
    expect(receiver.spans).toHaveLength(0);
  });

  it('is a no-op without an endpoint, and off with a warning for a bad one', () => {
    const none = stepTracerFromEnv({}, 'j');
    expect(none.enabled).toBe(false);
    expect(none.wrap(executeStep)).toBe(executeStep);
    const bad = stepTracerFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x' }, 'j');
    expect(bad.enabled).toBe(false);
    expect(bad.warning).toMatch(/OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/);
    expect(
      stepTracerFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, SANDSTREAM_TELEMETRY: 'off' }, 'j')
        .enabled,
    ).toBe(false);
  });

  it('never fails or holds a step when the collector is down or slow', async () => {
    // A port nobody listens on: the request fails; the step result is untouched.
    const closed = await startOtlpReceiver();
    const deadUrl = `${closed.url}/v1/traces`;
    await closed.close();
    const exporter = new OtlpSpanExporter({ url: deadUrl, resource: {}, exportTimeoutMs: 500 });
    const execute = createStepTracer({ jobId: 'j', exporter }).wrap(executeStep);
    const { ctx } = recordingContext(tmpdir());
    const started = Date.now();
    const outcome = await execute(runStep('x', 'exit 0', { traceContext: traced() }), ctx);
    expect(outcome.exitCode).toBe(0);
    await exporter.flush(2000);
    expect(Date.now() - started).toBeLessThan(2500);
    expect(exporter.dropped).toBe(1);
    expect(exporter.exported).toBe(0);

    // A collector answering 503 also only costs the span.
    receiver.failNext(1);
    const flaky = new OtlpSpanExporter({ url: `${receiver.url}/v1/traces`, resource: {} });
    const execute2 = createStepTracer({ jobId: 'j', exporter: flaky }).wrap(executeStep);
    expect((await execute2(runStep('y', 'exit 5', { traceContext: traced() }), ctx)).exitCode).toBe(5);
    await flaky.flush();
    expect(flaky.dropped).toBe(1);
    expect(receiver.requests.rejected).toBe(1);
  });

  it('bounds the exit flush when the collector accepts the connection but never answers', async () => {
    const sockets: Socket[] = [];
    const blackhole = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', () => r()));
    const { port } = blackhole.address() as AddressInfo;
    // An export timeout far beyond the bound below: only flush's own limit can end the wait in time.
    const exporter = new OtlpSpanExporter({
      url: `http://127.0.0.1:${port}/v1/traces`,
      resource: {},
      exportTimeoutMs: 60_000,
    });
    const execute = createStepTracer({ jobId: 'j', exporter }).wrap(executeStep);
    const { ctx } = recordingContext(tmpdir());
    expect((await execute(runStep('h', 'true', { traceContext: traced() }), ctx)).exitCode).toBe(0);
    const t0 = Date.now();
    await exporter.flush(300);
    expect(Date.now() - t0).toBeLessThan(10_000);
    for (const s of sockets) s.destroy();
    blackhole.close();
  });

  it('bounds memory: a full queue drops new spans and counts them', async () => {
    const exporter = new OtlpSpanExporter({
      url: `${receiver.url}/v1/traces`,
      resource: {},
      maxQueueSize: 3,
      maxBatchSize: 100,
      scheduledDelayMs: 60_000,
    });
    const span = {
      traceId: TRACE_ID,
      spanId: 'aaaaaaaaaaaaaaaa',
      parentSpanId: PARENT_ID,
      traceState: undefined,
      name: 'x',
      kind: 1,
      startTimeUnixNano: 1n,
      endTimeUnixNano: 2n,
      attributes: {},
      status: { code: 0 as const },
    };
    for (let i = 0; i < 5; i++) exporter.export(span);
    expect(exporter.dropped).toBe(2);
    await exporter.flush();
    expect(exporter.exported).toBe(3);
    expect(receiver.spans).toHaveLength(3);
  });
});
