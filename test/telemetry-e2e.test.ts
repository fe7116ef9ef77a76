import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bullJobId, createKeySpace, JobSpecSchema, type JobsPayload, QueueNames } from '@sandstream/bus';
import { initTelemetry, type Telemetry } from '@sandstream/telemetry';
import {
  deleteNamespaceKeys,
  type OtlpReceiver,
  type ReceivedSpan,
  repoRoot,
  startOtlpReceiver,
  testRedisUrl,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './helpers/services-stack.js';

/*
 * One trace per job through all four services as separate processes (built dist/) and the
 * agent they start (in-process backend: a real agent process per job): a three-step job whose
 * second step fails under continueOnError. This test process plays the submitter.
 */
const execFileAsync = promisify(execFile);
let receiver: OtlpReceiver;
let stack: Stack | undefined;
let telemetry: Telemetry;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // The SDK reads its exporter settings from process.env (the services get theirs below).
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
  telemetry = await initTelemetry({
    serviceName: 'submitter',
    env: { ...process.env, OTEL_METRICS_EXPORTER: 'none' },
  });
});
afterAll(async () => {
  await stack?.stop();
  await telemetry?.shutdown();
  await receiver?.close();
});

const jsonLines = (text: string) =>
  text.split('\n').flatMap((line) => {
    try {
      const parsed: unknown = JSON.parse(line);
      return parsed && typeof parsed === 'object' ? [parsed as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });

describe('telemetry end to end', () => {
  it('records SDK submit -> scheduler -> pod-lifecycle -> dispatcher -> agent as one trace', async () => {
    stack = await startStack({
      label: 'tele',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        // JSON, so the receiver can read the metric names (the submitter here sends protobuf).
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_METRIC_EXPORT_INTERVAL: '1000',
        // The endpoint as the agent inside the sandbox sees it (same host here).
        AGENT_OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      },
    });
    const jobId = `${stack.namespace}-traced`;
    const client = stack.client;
    // No span of our own: the SDK's submit() starts the root span and puts it into the job.
    await client.submit({
      id: jobId,
      image: 'debian:bookworm-slim',
      steps: [
        { command: 'echo', args: ['one'] },
        { command: 'echo broken >&2; exit 3', shell: true, continueOnError: true },
        { command: 'echo', args: ['three'] },
      ],
    });
    const queued = JobSpecSchema.parse((await client.get(jobId))?.spec);
    const submitTraceId = queued.traceContext?.traceparent.split('-')[1];
    expect(submitTraceId, 'submit() put no traceContext into the job').toMatch(/^[0-9a-f]{32}$/);
    const record = await client.wait(jobId, { timeoutMs: 60_000 });
    expect(record.state, stack.logs().slice(-3000)).toBe('succeeded');
    expect(record.stepResults['step-2']?.exitCode).toBe(3);

    // SIGTERM flushes every service's spans; the agent flushed its own when it exited.
    await stack.stop();
    // After the stop: pino writes asynchronously, the last lines land on exit.
    const logs = stack.logs();
    stack = undefined;
    await telemetry.shutdown();

    const want = [
      'scheduler.admit',
      'pod-lifecycle.start',
      'sandbox.create',
      'sandbox.wait_ready',
      'pod-lifecycle.destroy',
    ];
    await receiver.waitFor((all) => {
      const t = all.filter((s) => s.traceId === submitTraceId);
      return (
        want.every((n) => t.some((s) => s.name === n)) &&
        t.filter((s) => s.name === 'dispatcher.step').length === 3 &&
        t.filter((s) => s.name === 'agent.step run').length === 3
      );
    }, 20_000);
    const trace = receiver.spans.filter((s) => s.traceId === submitTraceId);
    const one = (name: string, where: (s: ReceivedSpan) => boolean = () => true) => {
      const found = trace.filter((s) => s.name === name && where(s));
      expect(found, `${name}: ${trace.map((s) => s.name).join(', ')}`).toHaveLength(1);
      return found[0] as ReceivedSpan;
    };

    const submit = one('sandstream.submit');
    expect(submit).toMatchObject({
      service: 'submitter',
      parentSpanId: undefined,
      kind: 'producer',
      attributes: {
        'sandstream.job.id': jobId,
        'sandstream.tenant': 'default',
        'container.image.name': 'debian:bookworm-slim',
        'sandstream.job.step_count': 3,
      },
    });
    const admit = one('scheduler.admit');
    expect(admit).toMatchObject({ service: 'scheduler', parentSpanId: submit.spanId, kind: 'consumer' });
    const start = one('pod-lifecycle.start');
    expect(start).toMatchObject({ service: 'pod-lifecycle', parentSpanId: admit.spanId });
    for (const name of ['sandbox.create', 'sandbox.wait_ready']) {
      expect(one(name)).toMatchObject({
        service: 'pod-lifecycle',
        parentSpanId: start.spanId,
        attributes: {
          'sandstream.sandbox.backend': 'inprocess',
          'container.image.name': 'debian:bookworm-slim',
        },
      });
    }
    const dispatch = one('dispatcher.dispatch');
    expect(dispatch).toMatchObject({ service: 'step-dispatcher', parentSpanId: start.spanId });

    for (const [stepId, exit] of [
      ['step-1', 0],
      ['step-2', 3],
      ['step-3', 0],
    ] as const) {
      const mine = (s: ReceivedSpan) => s.attributes['sandstream.step.id'] === stepId;
      const step = one('dispatcher.step', mine);
      expect(step).toMatchObject({
        service: 'step-dispatcher',
        parentSpanId: dispatch.spanId,
        attributes: { 'process.exit.code': exit },
      });
      const agent = one('agent.step run', mine);
      expect(agent).toMatchObject({
        service: 'sandstream-agent',
        parentSpanId: step.spanId,
        attributes: { 'sandstream.job.id': jobId, 'process.exit.code': exit },
      });
      // The agent's run lies inside the dispatcher's step span (same clock on this machine).
      expect(agent.startTimeUnixNano).toBeGreaterThanOrEqual(step.startTimeUnixNano);
      expect(agent.endTimeUnixNano).toBeLessThanOrEqual(step.endTimeUnixNano);
      const status = exit === 0 ? 'ok' : 'error';
      expect(agent.status.code).toBe(status);
      if (exit !== 0) {
        expect(step.status).toMatchObject({ code: 'error', message: 'exit code 3' });
        expect(agent.status.message).toBe('exit code 3');
      } else {
        expect(step.status.code).not.toBe('error');
      }
    }
    // The teardown is in the trace too, under the last step's span (the dispatcher finished
    // the job while handling that step's completion).
    const destroy = one('pod-lifecycle.destroy');
    const lastStep = one('dispatcher.step', (s) => s.attributes['sandstream.step.id'] === 'step-3');
    expect(destroy).toMatchObject({ service: 'pod-lifecycle', parentSpanId: lastStep.spanId });

    // Steps follow each other.
    const steps = trace
      .filter((s) => s.name === 'dispatcher.step')
      .sort((a, b) => Number(a.startTimeUnixNano - b.startTimeUnixNano));
    expect(steps.map((s) => s.attributes['sandstream.step.id'])).toEqual(['step-1', 'step-2', 'step-3']);

    // Logs of the three services on the job's path carry the job's trace id.
    const traced = jsonLines(logs).filter((l) => l.trace_id === submitTraceId);
    for (const service of ['scheduler', 'pod-lifecycle', 'step-dispatcher']) {
      expect(
        traced.some((l) => l.service === service),
        `${service} logged nothing with the trace id`,
      ).toBe(true);
    }
    // The services' metrics went out over OTLP too (shutdown flushes the last collection).
    const metricsOf = (service: string) => [...(receiver.metricNames.get(service) ?? [])];
    expect(metricsOf('scheduler')).toEqual(
      expect.arrayContaining(['sandstream.queue.wait_time', 'sandstream.queue.depth']),
    );
    expect(metricsOf('pod-lifecycle')).toEqual(
      expect.arrayContaining(['sandstream.sandbox.start_latency', 'sandstream.sandbox.active']),
    );
    // step.events: the StepResults' outputLines (events per second = its rate).
    expect(metricsOf('step-dispatcher')).toEqual(
      expect.arrayContaining(['sandstream.step.duration', 'sandstream.step.events']),
    );

    // Every span id a log line names is a span of this trace.
    const spanIds = new Set(trace.map((s) => s.spanId));
    for (const line of traced) expect(spanIds.has(String(line.span_id))).toBe(true);
  }, 120_000);

  it('the CLI exports its submit span and flushes it before exiting', async () => {
    const namespace = uniqueNamespace('tele-cli');
    const dir = mkdtempSync(join(tmpdir(), 'tele-cli-'));
    const redis = new Redis(testRedisUrl());
    try {
      const file = join(dir, 'job.yaml');
      writeFileSync(file, `id: ${namespace}-j\nimage: debian\nsteps:\n  - command: "true"\n`);
      // Asynchronously: the receiver lives in this process and must answer while the CLI runs.
      const run = await execFileAsync(
        process.execPath,
        [join(repoRoot, 'libs/client/dist/cli/main.js'), 'submit', file],
        {
          env: {
            ...process.env,
            REDIS_URL: testRedisUrl(),
            SANDSTREAM_NAMESPACE: namespace,
            OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
            // Far beyond the run: the span arrives only because exit flushes it.
            OTEL_BSP_SCHEDULE_DELAY: '60000',
          },
          encoding: 'utf8',
          timeout: 60_000,
        },
      );
      expect(run.stdout.trim()).toBe(`${namespace}-j`);
      // The exporter finished before the process exited: no waiting here.
      const span = receiver.spans.find((s) => s.service === 'sandstream-cli');
      expect(span).toMatchObject({
        name: 'sandstream.submit',
        parentSpanId: undefined,
        attributes: { 'sandstream.job.id': `${namespace}-j`, 'sandstream.job.step_count': 1 },
      });
      const queue = new Queue<JobsPayload>(QueueNames.jobs, {
        connection: redis,
        prefix: createKeySpace(namespace).bullPrefix,
      });
      const payload = (await queue.getJob(bullJobId(`${namespace}-j`)))?.data;
      await queue.close();
      expect(payload?.traceContext?.traceparent).toBe(`00-${span?.traceId}-${span?.spanId}-01`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await deleteNamespaceKeys(redis, namespace);
      redis.disconnect();
    }
  });
});
