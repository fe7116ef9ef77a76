import { OverLimitStop, type OverLimitStopOptions } from '../over-limit-stop.js';

/**
 * The stop both Redis monitors hand their verdicts to, with a dispatcher that records each
 * failure as `<jobId>: <reason>` instead of failing a job: what the monitor tests assert on.
 */
export function recordingOverLimitStop(options: Omit<OverLimitStopOptions, 'dispatcher'>) {
  const failed: string[] = [];
  const stop = new OverLimitStop({
    ...options,
    dispatcher: {
      failRunning: async (id, reasonOf) => {
        failed.push(`${id}: ${await reasonOf()}`);
      },
    },
  });
  return { stop, failed };
}
