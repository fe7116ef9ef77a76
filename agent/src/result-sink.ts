import type { SandboxKeys, StepResult } from '@sandstream/wire';
import { encodeCompletionNotice, RESULT_KEY_TTL_SECONDS, resultKey } from '@sandstream/wire/lean';
import type { ChainableCommander, Redis } from 'ioredis';
import { type AuthFailureClock, isAuthError } from './auth-failure.js';
import type { Logger } from './logger.js';

export interface ResultSinkOptions {
  redis: Redis;
  /** The job's keys: its results list, and the prefix of its per-step result keys. */
  keys: SandboxKeys;
  jobId: string;
  /** When set, a CompletionNotice is XADDed here after each result. */
  notifyStream?: string | undefined;
  notifyStreamMaxLength: number;
  log: Logger;
  /** When given, a delivery Redis refuses for our credentials (WRONGPASS) is repeated until the clock gives up. */
  auth?: AuthFailureClock;
}

/**
 * Delivers StepResults, then (optionally) a CompletionNotice on the shared notify stream, in one
 * pipeline so the notice can never arrive before the result it points to. Under the services (a
 * notify stream is set) each result is SET on its step's own key (wire resultKey), the one key the
 * dispatcher reads; a standalone agent LPUSHes to the job's results list (seed 000's contract). With `maxRetriesPerRequest: null` this waits through a Redis outage and
 * completes once Redis is back.
 */
export class ResultSink {
  constructor(private readonly options: ResultSinkOptions) {}

  /**
   * `leading` appends the commands that must reach Redis just before the result (the step's
   * `completed` event, and events still queued with it) to the same pipeline: one write and one
   * reply for all. Their failure is logged, like any event write; only the result's own failure
   * is thrown.
   */
  async deliver(result: StepResult, leading?: (pipeline: ChainableCommander) => void): Promise<void> {
    const { auth } = this.options;
    if (!auth) return this.deliverOnce(result, leading);
    // A refusal rejects the whole pipeline (nothing was written), so sending it again cannot
    // push the result twice.
    return auth.retry(() => this.deliverOnce(result, leading));
  }

  private async deliverOnce(
    result: StepResult,
    leading?: (pipeline: ChainableCommander) => void,
  ): Promise<void> {
    const { redis, keys, jobId, notifyStream, notifyStreamMaxLength } = this.options;
    const pipeline = redis.pipeline();
    if (leading) leading(pipeline);
    const first = pipeline.length;
    if (notifyStream && result.stepId) {
      pipeline.set(resultKey(keys, result.stepId), JSON.stringify(result), 'EX', RESULT_KEY_TTL_SECONDS);
    } else pipeline.lpush(keys.results, JSON.stringify(result));
    if (notifyStream) {
      // A result without a readable stepId is still announced (stepId ""), so the reader looks.
      const fields = encodeCompletionNotice({ jobId, stepId: result.stepId ?? '' });
      pipeline.xadd(notifyStream, 'MAXLEN', '~', notifyStreamMaxLength, '*', ...fields);
    }
    const replies = (await pipeline.exec()) ?? [];
    const leadingError = replies.slice(0, first).find(([err]) => err)?.[0];
    if (leadingError) this.options.log.warn('event write failed', { error: String(leadingError) });
    const [resultError] = replies[first] ?? [null];
    if (resultError && isAuthError(resultError)) throw resultError;
    if (resultError)
      throw new Error(`writing the result of step ${result.stepId} failed: ${String(resultError)}`);
    // The notice only saves a reader a poll; a broken shared stream must not stop this agent.
    const [noticeError] = replies[first + 1] ?? [null];
    if (noticeError) {
      this.options.log.error('completion notice not written', {
        stream: notifyStream,
        error: String(noticeError),
      });
    }
  }
}
