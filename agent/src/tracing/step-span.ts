import { randomBytes } from 'node:crypto';
import type { Step } from '@sandstream/wire';
import type { StepContext, StepOutcome } from '../steps/step-context.js';
import type { FinishedSpan, SpanAttributeValue } from './otlp-json.js';
import { OtlpSpanExporter } from './otlp-span-exporter.js';
import { parseTraceparent } from './traceparent.js';
import { tracingConfigFromEnv } from './tracing-config.js';

export type Executor = (step: Step, ctx: StepContext) => Promise<StepOutcome>;

export interface StepTracer {
  /** An executor that records a span around each step the inner one runs. */
  wrap(execute: Executor): Executor;
  /** Sends pending spans, waiting at most `timeoutMs`. Never rejects. */
  flush(timeoutMs?: number): Promise<void>;
}

/**
 * Wall-clock nanoseconds with the monotonic clock's resolution: the anchor is taken once. It comes
 * from performance.timeOrigin (the wall clock at start, to the microsecond), not Date.now(), whose
 * whole milliseconds put the anchor up to 1 ms early: the agent's span then started before the
 * dispatcher's span it lies in (seen in CI, 0.14 ms early). Split in whole and fractional
 * milliseconds because the nanoseconds since 1970 are past a double's exact integers.
 */
function wallClockAnchorNs(): bigint {
  const ms = performance.timeOrigin + performance.now();
  const whole = Math.floor(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6)) - process.hrtime.bigint();
}
// Taken on first use, not at module load: the single executable's module state comes from a V8
// startup snapshot made at build time, on another machine, whose clocks mean nothing here.
let anchorNs: bigint | undefined;
const nowNs = () => {
  anchorNs ??= wallClockAnchorNs();
  return anchorNs + process.hrtime.bigint();
};

const MAX_ARGS = 64;
const MAX_ATTR_CHARS = 1024;
const clip = (s: string) => (s.length > MAX_ATTR_CHARS ? `${s.slice(0, MAX_ATTR_CHARS)}…` : s);

function stepAttributes(step: Step, jobId: string): Record<string, SpanAttributeValue> {
  const attrs: Record<string, SpanAttributeValue> = {
    'sandstream.job.id': jobId,
    'sandstream.step.id': step.stepId,
    'sandstream.step.kind': step.kind,
  };
  if (step.kind === 'run') {
    attrs['process.executable.name'] = clip(step.command);
    attrs['process.command_args'] = [step.command, ...step.args].slice(0, MAX_ARGS).map(clip);
    attrs['sandstream.step.shell'] = step.shell;
  } else if ('path' in step) {
    attrs['sandstream.step.path'] = clip(step.path);
  }
  return attrs;
}

function outcomeAttributes(outcome: StepOutcome): Record<string, SpanAttributeValue> {
  const attrs: Record<string, SpanAttributeValue> = { 'sandstream.step.timed_out': outcome.timedOut };
  if (outcome.exitCode !== null) attrs['process.exit.code'] = outcome.exitCode;
  if (outcome.errorCode) attrs['error.type'] = outcome.errorCode;
  if (outcome.cancelled) attrs['sandstream.step.cancelled'] = true;
  return attrs;
}

function failed(outcome: StepOutcome): string | undefined {
  if (outcome.errorMessage) return outcome.errorMessage;
  if (outcome.timedOut) return 'timed out';
  if (outcome.exitCode !== null && outcome.exitCode !== 0) return `exit code ${outcome.exitCode}`;
  return undefined;
}

export interface StepTracerOptions {
  jobId: string;
  /** Undefined: no spans are recorded (tracing off). */
  exporter: OtlpSpanExporter | undefined;
}

/**
 * Records each step as a child of the span named by the Step's traceContext (the dispatcher's
 * span for that step). Steps without a valid context, or whose parent was not sampled, are run
 * untouched: the agent follows the services' sampling decision rather than making its own.
 */
export function createStepTracer({ jobId, exporter }: StepTracerOptions): StepTracer {
  return {
    wrap(execute) {
      if (!exporter) return execute;
      return async (step, ctx) => {
        const parent = parseTraceparent(step.traceContext);
        if (!parent?.sampled) return execute(step, ctx);
        const span: FinishedSpan = {
          traceId: parent.traceId,
          spanId: randomBytes(8).toString('hex'),
          parentSpanId: parent.spanId,
          traceState: parent.traceState,
          name: `agent.step ${step.kind}`,
          kind: 1,
          startTimeUnixNano: nowNs(),
          endTimeUnixNano: 0n,
          attributes: stepAttributes(step, jobId),
          status: { code: 0 },
        };
        try {
          const outcome = await execute(step, ctx);
          const error = failed(outcome);
          span.attributes = { ...span.attributes, ...outcomeAttributes(outcome) };
          span.status = error ? { code: 2, message: clip(error) } : { code: 1 };
          return outcome;
        } catch (err) {
          span.status = { code: 2, message: clip(`executor threw: ${(err as Error).message}`) };
          throw err;
        } finally {
          span.endTimeUnixNano = nowNs();
          exporter.export(span);
        }
      };
    },
    flush: (timeoutMs) => exporter?.flush(timeoutMs) ?? Promise.resolve(),
  };
}

/**
 * The tracer the agent uses: exporting to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
 * OTEL_EXPORTER_OTLP_ENDPOINT when set, a no-op otherwise. `warning` is set when an endpoint was
 * given but unusable, so the caller can log it once.
 */
export function stepTracerFromEnv(
  env: NodeJS.ProcessEnv,
  jobId: string,
): StepTracer & { warning: string | undefined; enabled: boolean } {
  const config = tracingConfigFromEnv(env);
  const exporter = config.url
    ? new OtlpSpanExporter({
        url: config.url,
        headers: config.headers,
        resource: {
          'service.name': config.serviceName,
          'sandstream.job.id': jobId,
          'process.pid': process.pid,
        },
      })
    : undefined;
  return {
    ...createStepTracer({ jobId, exporter }),
    warning: config.warning,
    enabled: exporter !== undefined,
  };
}
