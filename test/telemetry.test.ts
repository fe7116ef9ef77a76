import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { type OtlpReceiver, startOtlpReceiver, testRedisUrl } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

/*
 * One trace across three real processes: a submitter and a BullMQ worker that use
 * @sandstream/telemetry (built dist/), and the real agent binary with its own OTLP exporter.
 * The worker fails its first delivery, so the test also checks that a retried job stays in the
 * trace as a sibling attempt rather than a deeper chain.
 */
const REDIS_URL = testRedisUrl();
const root = fileURLToPath(new URL('..', import.meta.url));
const testDir = fileURLToPath(new URL('.', import.meta.url));
const agentMain = fileURLToPath(new URL('../agent/dist/main.js', import.meta.url));

const SUBMITTER = `
import { SpanKind } from '@opentelemetry/api';
import { createLogger, initTelemetry, injectTraceContext, withSpan } from '@sandstream/telemetry';
import { Queue } from 'bullmq';
const { QUEUE, JOB_ID, REDIS_URL } = process.env;
const telemetry = await initTelemetry({ serviceName: 'svc-submit' });
const log = createLogger({ service: 'svc-submit' });
const queue = new Queue(QUEUE, { connection: { url: REDIS_URL } });
await withSpan('job.submit', { kind: SpanKind.PRODUCER, attributes: { 'sandstream.job.id': JOB_ID } }, async () => {
  log.info({ jobId: JOB_ID }, 'submitting');
  await queue.add('job', { jobId: JOB_ID, enqueuedAt: Date.now(), traceContext: injectTraceContext() }, {
    attempts: 2, backoff: { type: 'fixed', delay: 200 }, removeOnComplete: true,
  });
});
await queue.close();
await telemetry.shutdown();
`;

const WORKER = `
import { createLogger, createSandstreamMetrics, initTelemetry, injectTraceContext, withJobSpan, withSpan } from '@sandstream/telemetry';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
const { QUEUE, REDIS_URL } = process.env;
const telemetry = await initTelemetry({ serviceName: 'svc-worker' });
const log = createLogger({ service: 'svc-worker' });
const metrics = createSandstreamMetrics();
const redis = new Redis(REDIS_URL);
const worker = new Worker(QUEUE, (job) => withJobSpan('scheduler.process', {
  traceContext: job.data.traceContext, attempt: job.attemptsMade + 1,
  attributes: { 'sandstream.job.id': job.data.jobId },
}, async () => {
  log.info({ attempt: job.attemptsMade + 1 }, 'processing job');
  if (job.attemptsMade === 0) throw new Error('no slot free yet');
  metrics.queueWaitSeconds.record((Date.now() - job.data.enqueuedAt) / 1000, { queue: QUEUE });
  const keys = (s) => 'sandbox:' + job.data.jobId + ':' + s;
  await withSpan('dispatcher.step', { attributes: { 'sandstream.step.id': 's1' } }, async (span) => {
    const step = { schemaVersion: 1, stepId: 's1', command: 'echo hello; exit 4', shell: true, traceContext: injectTraceContext() };
    await redis.lpush(keys('in'), JSON.stringify(step));
    log.info({ stepId: 's1' }, 'step pushed');
    const popped = await redis.brpop(keys('results'), 30);
    if (!popped) throw new Error('no result within 30 s');
    const result = JSON.parse(popped[1]);
    span.setAttribute('process.exit.code', result.exitCode);
    if (result.exitCode !== 0) span.setStatus({ code: 2, message: 'exit code ' + result.exitCode });
  });
  await redis.lpush(keys('in'), JSON.stringify({ schemaVersion: 1, stepId: 'bye', kind: 'shutdown' }));
}), { connection: { url: REDIS_URL, maxRetriesPerRequest: null } });
worker.on('ready', () => log.info('worker ready'));
process.on('SIGTERM', async () => {
  await worker.close();
  redis.disconnect();
  await telemetry.shutdown();
  log.info('worker stopped');
  process.exit(0);
});
`;

interface Proc {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  exited: Promise<number | null>;
  stderr: string[];
}

function start(command: string[], env: Record<string, string>): Proc {
  const [bin, ...args] = command as [string, ...string[]];
  const child = spawn(bin, args, {
    cwd: testDir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  const stderr: string[] = [];
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const line of parts) {
      try {
        lines.push(JSON.parse(line));
      } catch {
        lines.push({ raw: line });
      }
    }
  });
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, exited, stderr };
}

const node = (script: string) => ['node', '--input-type=module', '-e', script];

async function until(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  await vi.waitUntil(check, { timeout: timeoutMs, interval: 50 }).catch(() => {
    throw new Error(`timed out waiting for ${what}`);
  });
}

let receiver: OtlpReceiver;
const suffix = randomBytes(4).toString('hex');
const queueName = `telemetry-test-${suffix}`;
const jobId = `telemetry-${suffix}`;
const redis = new Redis(REDIS_URL);

beforeAll(async () => {
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  const queue = new Queue(queueName, { connection: { url: REDIS_URL } });
  await queue.obliterate({ force: true }).catch(() => undefined);
  await queue.close();
  await redis.unlink(
    ...['in', 'events', 'results', 'heartbeat', 'control'].map((k) => `sandbox:${jobId}:${k}`),
  );
  redis.disconnect();
  await receiver.close();
});

describe('one trace per job across processes', () => {
  it('joins submit -> BullMQ worker (retried) -> dispatcher step -> agent step, with logs carrying the trace id', async () => {
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_METRIC_EXPORT_INTERVAL: '500',
      REDIS_URL,
      QUEUE: queueName,
      JOB_ID: jobId,
    };
    // The worker uses the OTLP/JSON protocol, the submitter the SDK default (protobuf).
    const worker = start(node(WORKER), { ...otel, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    await until(() => worker.lines.some((l) => l.msg === 'worker ready'), 'worker ready');
    const agent = start(['node', agentMain, '--redis-url', REDIS_URL, '--job-id', jobId, '--workdir', root], {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    });
    const submitter = start(node(SUBMITTER), otel);
    expect(await submitter.exited, submitter.stderr.join('')).toBe(0);
    // The agent exits 0 on the shutdown step the worker sends after the step's result.
    expect(await agent.exited, agent.stderr.join('')).toBe(0);
    await until(
      () => worker.lines.some((l) => l.msg === 'processing job' && l.attempt === 2),
      'second attempt',
    );
    worker.child.kill('SIGTERM');
    expect(await worker.exited, worker.stderr.join('')).toBe(0);

    const spans = await receiver.waitFor(
      (s) =>
        s.filter((x) => x.attributes['sandstream.job.id'] === jobId || x.name.startsWith('dispatcher'))
          .length >= 5,
    );
    const submit = spans.find((s) => s.name === 'job.submit' && s.attributes['sandstream.job.id'] === jobId);
    expect(submit).toBeDefined();
    const traceId = submit!.traceId;
    const inTrace = spans.filter((s) => s.traceId === traceId);
    const byName = (name: string) => inTrace.filter((s) => s.name === name);

    expect(submit).toMatchObject({
      parentSpanId: undefined,
      kind: 'producer',
      service: 'svc-submit',
      encoding: 'protobuf',
    });
    // Both deliveries are children of the submit span: a retry adds a sibling, not a level.
    const attempts = byName('scheduler.process').sort(
      (a, b) =>
        Number(a.attributes['sandstream.job.attempt']) - Number(b.attributes['sandstream.job.attempt']),
    );
    expect(attempts).toHaveLength(2);
    for (const a of attempts) {
      expect(a).toMatchObject({
        parentSpanId: submit!.spanId,
        kind: 'consumer',
        service: 'svc-worker',
        encoding: 'json',
      });
    }
    expect(attempts[0]).toMatchObject({ status: { code: 'error', message: 'no slot free yet' } });
    expect(attempts[1]?.status.code).not.toBe('error');

    const [dispatch] = byName('dispatcher.step');
    expect(dispatch).toMatchObject({
      parentSpanId: attempts[1]!.spanId,
      status: { code: 'error', message: 'exit code 4' },
      attributes: { 'process.exit.code': 4 },
    });
    const [agentSpan] = byName('agent.step run');
    expect(agentSpan).toMatchObject({
      parentSpanId: dispatch!.spanId,
      service: 'sandstream-agent',
      status: { code: 'error', message: 'exit code 4' },
      attributes: { 'sandstream.job.id': jobId, 'sandstream.step.id': 's1', 'process.exit.code': 4 },
    });
    // The agent's span lies inside the dispatcher's, up to the two processes' clocks: each stamps
    // spans from its own performance.timeOrigin plus its monotonic clock, so processes started at
    // different moments can disagree by a few ms when the wall clock was slewed or stepped
    // between their starts (seen once in CI: the agent's end 5.6 ms after the dispatcher's). A
    // skew bound, not a bound on the work's time: a span outside its parent by more is caught.
    const skewNs = 50_000_000n;
    expect(agentSpan!.startTimeUnixNano).toBeGreaterThanOrEqual(dispatch!.startTimeUnixNano - skewNs);
    expect(agentSpan!.endTimeUnixNano).toBeLessThanOrEqual(dispatch!.endTimeUnixNano + skewNs);
    expect(inTrace).toHaveLength(5);

    // Logs: lines written inside spans carry this trace and the right span; others carry none.
    const pushed = worker.lines.find((l) => l.msg === 'step pushed');
    expect(pushed).toMatchObject({ service: 'svc-worker', trace_id: traceId, span_id: dispatch!.spanId });
    const processing = worker.lines.filter((l) => l.msg === 'processing job');
    expect(processing.map((l) => l.span_id)).toEqual(attempts.map((a) => a.spanId));
    expect(worker.lines.find((l) => l.msg === 'worker ready')).not.toHaveProperty('trace_id');
    expect(submitter.lines.find((l) => l.msg === 'submitting')).toMatchObject({ trace_id: traceId });

    // OTLP metrics were exported too (flushed by shutdown at the latest).
    expect(receiver.requests.metrics).toBeGreaterThan(0);
  });
});
