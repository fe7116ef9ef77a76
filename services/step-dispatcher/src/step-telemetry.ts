import type { DispatchKeys, JobStore, MaterializedStep, RedisClient } from '@sandstream/bus';
import {
  metricsEnabled,
  planChildSpan,
  recordPlannedSpan,
  type SandstreamMetrics,
  tracingEnabled,
} from '@sandstream/telemetry';
import { type StepResult, StepSchema, type TraceContext } from '@sandstream/wire';

/*
 * What the dispatcher records about each finished step: a `dispatcher.step` span and the step
 * metrics (duration by kind and outcome, dropped output lines).
 *
 * The span covers the step from its push to the dispatcher seeing its result, with the agent's
 * span for the step nested inside. A step's Step JSON is frozen in the dispatch state when the job
 * starts, and every later push happens inside a Lua script on whichever replica handles the
 * previous completion, so no replica can hold a live span for a step. Each step's span id is
 * planned at start and carried in its Step's traceContext (the agent parents on it); the replica
 * that sees the completion records the span with that id, from the push time kept next to the
 * dispatch state. With telemetry off none of this reads or writes Redis.
 */
export interface StepTelemetryOptions {
  redis: RedisClient;
  /** Reads the recorded StepResult (the job record's layout is job-store's). */
  jobStore: JobStore;
  dispatchKeys: DispatchKeys;
  metrics?: SandstreamMetrics;
}

const STEP_ID = /^step-(\d+)$/;

/** The reply shapes (see dispatch-scripts.ts) after which a step's result has been recorded. */
function stepWasRecorded(reply: readonly (string | number)[]): boolean {
  return reply[0] === 'pushed' || (reply[0] === 'finished' && Number(reply[3]) === 1);
}

function outcomeOf(r: StepResult): string {
  if (r.cancelled) return 'cancelled';
  if (r.timedOut) return 'timed_out';
  if (r.errorMessage !== null || (r.exitCode !== null && r.exitCode !== 0)) return 'failed';
  return 'succeeded';
}

function errorOf(r: StepResult | undefined): string | undefined {
  if (!r) return 'no readable result';
  if (r.errorMessage) return r.errorMessage;
  if (r.timedOut) return 'timed out';
  if (r.exitCode !== null && r.exitCode !== 0) return `exit code ${r.exitCode}`;
  return undefined;
}

export class StepTelemetry {
  constructor(private readonly options: StepTelemetryOptions) {}

  /** At dispatch, inside the dispatch span: gives every step its own planned child span. */
  plan(steps: MaterializedStep[]): void {
    for (const s of steps) {
      const tc = planChildSpan();
      if (tc) s.step.traceContext = tc;
    }
  }

  /**
   * After the advance script answered for `stepId`: when the script recorded the step's result
   * (not for stale or duplicate notices) records its span and metrics, and keeps the push time of
   * the step the script pushed next (`advancedAt`, taken before the script ran: the agent may
   * start that step before the reply is back). Returns the step span's context, so that what the
   * dispatcher logs next is tagged with the job's trace. Never throws.
   */
  async completed(
    jobId: string,
    stepId: string,
    reply: readonly (string | number)[],
    advancedAt: number,
  ): Promise<TraceContext | undefined> {
    const tracing = tracingEnabled();
    const measuring = this.options.metrics !== undefined && metricsEnabled();
    if ((!tracing && !measuring) || !stepWasRecorded(reply)) return undefined;
    try {
      return await this.record(jobId, stepId, reply, advancedAt, tracing);
    } catch {
      // Telemetry is never worth failing (or redelivering) a step completion for.
      return undefined;
    }
  }

  private async record(
    jobId: string,
    stepId: string,
    reply: readonly (string | number)[],
    advancedAt: number,
    tracing: boolean,
  ): Promise<TraceContext | undefined> {
    const match = STEP_ID.exec(stepId);
    if (!match) return undefined;
    const index = Number(match[1]) - 1;
    const { redis, jobStore, dispatchKeys, metrics } = this.options;
    if (tracing && reply[0] === 'pushed') {
      // NX: a redelivered notice must not move the next step's start. Step 0 uses startedAt.
      await redis.hsetnx(dispatchKeys.dispatchState(jobId), `pushedAt:${reply[1]}`, advancedAt);
    }
    const [[rawStep, pushedAt, startedAt], r] = await Promise.all([
      redis.hmget(dispatchKeys.dispatchState(jobId), `step:${index}`, `pushedAt:${index}`, 'startedAt'),
      jobStore.getStepResult(jobId, stepId),
    ]);
    const step = StepSchema.safeParse(safeJson(rawStep));
    const kind = step.success ? step.data.kind : 'unknown';
    if (metrics && r) {
      metrics.stepDurationSeconds.record(r.durationSeconds, { kind, outcome: outcomeOf(r) });
      // Lines produced (shipped + dropped): rate() of it is the events per second.
      if (r.outputLines) metrics.stepEvents.add(r.outputLines);
      if (r.droppedLines) metrics.droppedLines.add(r.droppedLines);
    }
    if (!tracing || !step.success || !step.data.traceContext) return undefined;

    const endTime = Date.now();
    const pushedMs = Number(pushedAt ?? (index === 0 ? startedAt : undefined));
    const startTime =
      Number.isFinite(pushedMs) && pushedMs > 0 ? pushedMs : endTime - (r?.durationSeconds ?? 0) * 1000;
    const error = errorOf(r);
    recordPlannedSpan(step.data.traceContext, {
      name: 'dispatcher.step',
      startTime,
      endTime,
      attributes: {
        'sandstream.job.id': jobId,
        'sandstream.step.id': stepId,
        'sandstream.step.kind': kind,
        ...(r?.exitCode !== null && r?.exitCode !== undefined ? { 'process.exit.code': r.exitCode } : {}),
        ...(r?.errorCode ? { 'error.type': r.errorCode } : {}),
      },
      ...(error ? { error } : {}),
    });
    return step.data.traceContext;
  }
}

function safeJson(raw: string | null | undefined): unknown {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
