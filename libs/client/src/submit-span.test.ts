import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { bullJobId, type JobsPayload, QueueNames } from '@sandstream/bus';
import { deleteNamespaceKeys, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';

// A real tracer provider (in-memory exporter) registered as the global one, as an application
// that set up OpenTelemetry would; real Redis under a namespace of its own.
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const namespace = uniqueNamespace('submit-span');
const redis = new Redis(testRedisUrl());
const client = new SandstreamClient({ redis, namespace });
const queue = new Queue<JobsPayload>(QueueNames.jobs, { connection: redis, prefix: client.keys.bullPrefix });

beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
});
beforeEach(() => exporter.reset());
afterAll(async () => {
  trace.disable();
  await provider.shutdown();
  await client.close();
  await queue.close();
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
});

const spec = (id: string) => ({
  id: `${namespace}-${id}`,
  tenant: 'acme',
  image: 'debian:bookworm-slim',
  steps: [{ command: 'true' }, { command: 'echo', args: ['hi'] }],
});

async function queuedPayload(jobId: string): Promise<JobsPayload | undefined> {
  return (await queue.getJob(bullJobId(jobId)))?.data;
}

describe('SandstreamClient.submit tracing', () => {
  it('starts a sandstream.submit span and queues the job with its traceparent', async () => {
    const { jobId } = await client.submit(spec('a'));
    const [span, ...rest] = exporter.getFinishedSpans();
    expect(rest).toHaveLength(0);
    expect(span?.name).toBe('sandstream.submit');
    expect(span?.kind).toBe(SpanKind.PRODUCER);
    expect(span?.parentSpanContext).toBeUndefined();
    expect(span?.attributes).toMatchObject({
      'sandstream.job.id': jobId,
      'sandstream.tenant': 'acme',
      'container.image.name': 'debian:bookworm-slim',
      'sandstream.job.step_count': 2,
      'sandstream.job.created': true,
    });
    const { traceId, spanId } = span?.spanContext() ?? {};
    expect((await queuedPayload(jobId))?.traceContext).toEqual({ traceparent: `00-${traceId}-${spanId}-01` });
    // The record's spec carries it too (the scheduler reads the payload; status shows the record).
    expect((await client.get(jobId))?.spec).toMatchObject({
      traceContext: { traceparent: `00-${traceId}-${spanId}-01` },
    });
  });

  it('makes a traceContext passed by the caller the parent, and queues its own', async () => {
    const caller = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const { jobId } = await client.submit({ ...spec('b'), traceContext: { traceparent: caller } });
    const span = exporter.getFinishedSpans()[0];
    expect(span?.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(span?.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect((await queuedPayload(jobId))?.traceContext?.traceparent).toBe(
      `00-0af7651916cd43dd8448eb211c80319c-${span?.spanContext().spanId}-01`,
    );
  });

  it('marks a refused spec as an error on the span and queues nothing', async () => {
    await expect(client.submit({ image: 'debian', steps: [] }, 'job.yaml')).rejects.toThrow(
      /job\.yaml: invalid job spec: steps: a job needs at least one step/,
    );
    const span = exporter.getFinishedSpans()[0];
    expect(span?.name).toBe('sandstream.submit');
    expect(span?.status).toMatchObject({ code: SpanStatusCode.ERROR });
    expect(span?.status.message).toMatch(/a job needs at least one step/);
    expect(await queue.count()).toBe(2);
  });

  it('with no tracer provider registered, queues no context of its own (the caller’s passes through)', async () => {
    trace.disable();
    try {
      const plain = await client.submit(spec('c'));
      expect((await queuedPayload(plain.jobId))?.traceContext).toBeUndefined();
      const caller = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
      const passed = await client.submit({ ...spec('d'), traceContext: caller });
      expect((await queuedPayload(passed.jobId))?.traceContext).toEqual(caller);
      expect(exporter.getFinishedSpans()).toHaveLength(0);
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
  });
});
