import type { DispatchKeys, KeySpace, MaterializedStep, RedisClient } from '@sandstream/bus';
import { planChildSpan, recordPlannedSpan, tracingEnabled } from '@sandstream/telemetry';
import { StepResultSchema, StepSchema, type TraceContext } from '@sandstream/wire';

/*
 * One `dispatcher.step` span per step, from its push to the dispatcher seeing its result, with
 * the agent's span for the step nested inside. A step's Step JSON is frozen in the dispatch
 * state when the job starts and the push of every later step happens inside a Lua script, on
 * whichever replica handles the previous completion; so no replica can hold a live span for a
 * step. Each step's span id is planned at start and carried in its Step's traceContext (the
 * agent parents on it); the replica that sees the completion records the span with that id,
 * from the push time kept next to the dispatch state. All of it is skipped when telemetry is off.
 */
export interface StepSpansOptions {
  redis: RedisClient;
  keySpace: KeySpace;
  dispatchKeys: DispatchKeys;
}

const STEP_ID = /^step-(\d+)$/;

/** The reply shapes (see dispatch-scripts.ts) after which a step's result has been recorded. */
function stepWasRecorded(reply: readonly (string | number)[]): boolean {
  return reply[0] === 'pushed' || (reply[0] === 'finished' && Number(reply[3]) === 1);
}

export class StepSpans {
  constructor(private readonly options: StepSpansOptions) {}

  /** At dispatch, inside the dispatch span: gives every step its own planned child span. */
  plan(steps: MaterializedStep[]): void {
    for (const s of steps) {
      const tc = planChildSpan();
      if (tc) s.step.traceContext = tc;
    }
  }

  /**
   * After the advance script answered for `stepId`: records the step's span when the script
   * recorded its result (not for stale or duplicate notices), and the push time of the step the
   * script pushed next (`advancedAt`, taken before the script ran: the agent may start it before
   * the reply is back). Returns the step span's context, so that what the dispatcher logs next
   * is tagged with this job's trace.
   */
  async completed(
    jobId: string,
    stepId: string,
    reply: readonly (string | number)[],
    advancedAt: number,
  ): Promise<TraceContext | undefined> {
    if (!tracingEnabled() || !stepWasRecorded(reply)) return undefined;
    try {
      return await this.record(jobId, stepId, reply, advancedAt);
    } catch {
      // A span is never worth failing (or redelivering) a step completion for.
      return undefined;
    }
  }

  private async record(
    jobId: string,
    stepId: string,
    reply: readonly (string | number)[],
    advancedAt: number,
  ): Promise<TraceContext | undefined> {
    const match = STEP_ID.exec(stepId);
    if (!match) return undefined;
    const index = Number(match[1]) - 1;
    const { redis, keySpace, dispatchKeys } = this.options;
    if (reply[0] === 'pushed') {
      // NX: a redelivered notice must not move the next step's start. Step 0 uses startedAt.
      await redis.hsetnx(dispatchKeys.dispatchState(jobId), `pushedAt:${reply[1]}`, advancedAt);
    }
    const [[rawStep, pushedAt, startedAt], rawResult] = await Promise.all([
      redis.hmget(dispatchKeys.dispatchState(jobId), `step:${index}`, `pushedAt:${index}`, 'startedAt'),
      redis.hget(keySpace.job(jobId), `step:${stepId}`),
    ]);
    const step = StepSchema.safeParse(safeJson(rawStep));
    const result = StepResultSchema.safeParse(safeJson(rawResult));
    if (!step.success || !step.data.traceContext) return undefined;
    const endTime = Date.now();
    const pushedMs = Number(pushedAt ?? (index === 0 ? startedAt : undefined));
    const r = result.success ? result.data : undefined;
    const startTime =
      Number.isFinite(pushedMs) && pushedMs > 0 ? pushedMs : endTime - (r?.durationSeconds ?? 0) * 1000;
    const error = r
      ? (r.errorMessage ??
        (r.timedOut
          ? 'timed out'
          : r.exitCode !== null && r.exitCode !== 0
            ? `exit code ${r.exitCode}`
            : undefined))
      : 'no readable result';
    recordPlannedSpan(step.data.traceContext, {
      name: 'dispatcher.step',
      startTime,
      endTime,
      attributes: {
        'sandstream.job.id': jobId,
        'sandstream.step.id': stepId,
        'sandstream.step.kind': step.data.kind,
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
