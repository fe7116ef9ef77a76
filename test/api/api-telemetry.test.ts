import { randomBytes } from 'node:crypto';
import { type OtlpReceiver, startOtlpReceiver } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

// One trace per request, joined to the job's or sandbox's trace: the API's SERVER span continues
// the caller's traceparent, and the services' spans for what it created are in that trace.

let receiver: OtlpReceiver;
let s: ApiStack | undefined;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
}, 30_000);

afterAll(async () => {
  await s?.stop();
  await receiver?.close();
}, 60_000);

describe('API traces', () => {
  it("a job and a sandbox created over HTTP are in the caller's trace, under the API's request span", async () => {
    s = await startApiStack({
      label: 'api-tele',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_METRICS_EXPORTER: 'none',
      },
    });
    const traceparent = (traceId: string) => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
    const jobTrace = randomBytes(16).toString('hex');
    const submitted = await s.request('/v1/jobs', {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: traceparent(jobTrace) },
      body: JSON.stringify({ steps: [{ command: 'echo', args: ['traced'] }] }),
    });
    expect(submitted.status).toBe(201);
    const { jobId } = (await submitted.json()) as { jobId: string };
    await s.stack.client.wait(jobId, { timeoutMs: 60_000 });

    const sandboxTrace = randomBytes(16).toString('hex');
    const created = await s.request('/v1/sandboxes', {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: traceparent(sandboxTrace) },
      body: '{}',
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    // Requests on what exists: each a trace of its own, linked to the job's or sandbox's trace.
    const execTrace = randomBytes(16).toString('hex');
    const exec = await s.request(`/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: traceparent(execTrace) },
      body: JSON.stringify({ command: 'true' }),
    });
    expect(exec.status).toBe(200);
    const readTrace = randomBytes(16).toString('hex');
    const read = await s.request(`/v1/jobs/${jobId}`, { headers: { traceparent: traceparent(readTrace) } });
    expect(read.status).toBe(200);
    await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE' });

    // SIGTERM flushes every process's spans.
    const running = s;
    s = undefined;
    await running.stop();
    await receiver.waitFor((all) => {
      const inTrace = (t: string) => all.filter((x) => x.traceId === t).map((x) => x.name);
      return (
        inTrace(jobTrace).includes('POST /v1/jobs') &&
        inTrace(jobTrace).includes('scheduler.admit') &&
        inTrace(sandboxTrace).includes('POST /v1/sandboxes') &&
        inTrace(sandboxTrace).includes('pod-lifecycle.start') &&
        inTrace(execTrace).length > 0 &&
        inTrace(readTrace).length > 0
      );
    }, 20_000);
    const request = receiver.spans.find((x) => x.traceId === jobTrace && x.name === 'POST /v1/jobs');
    expect(request).toMatchObject({ kind: 'server', service: 'api' });
    expect(request?.attributes['http.response.status_code']).toBe(201);
    const submit = receiver.spans.find((x) => x.traceId === jobTrace && x.name === 'sandstream.submit');
    expect(submit?.parentSpanId).toBe(request?.spanId);
    const execSpan = receiver.spans.find((x) => x.traceId === execTrace && x.kind === 'server');
    expect(execSpan?.name).toBe('POST /v1/sandboxes/:id/exec');
    expect(execSpan?.links.map((l) => l.traceId)).toEqual([sandboxTrace]);
    const readSpan = receiver.spans.find((x) => x.traceId === readTrace && x.kind === 'server');
    expect(readSpan?.links.map((l) => l.traceId)).toEqual([jobTrace]);
  }, 120_000);
});
