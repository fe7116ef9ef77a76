import type { JobState } from '@sandstream/bus';

/**
 * `sandstream submit --follow` and `logs -f` exit with the job's outcome, in the conventions
 * shells already use: 124 is what timeout(1) returns, 130 is 128 + SIGINT.
 */
export const ExitCodes = {
  succeeded: 0,
  failed: 1,
  /** Bad usage, unreadable or invalid job file. */
  usage: 2,
  /** Redis unreachable or another infrastructure error. */
  infrastructure: 3,
  /** `status`, `logs` or `cancel` of a job id that does not exist (in this namespace). */
  notFound: 4,
  timedOut: 124,
  /** `exec`: Sandstream itself failed (not the command), as docker exec / timeout(1) use 125. */
  execFailed: 125,
  cancelled: 130,
} as const;

export function exitCodeFor(state: JobState): number {
  switch (state) {
    case 'succeeded':
      return ExitCodes.succeeded;
    case 'timed-out':
      return ExitCodes.timedOut;
    case 'cancelled':
      return ExitCodes.cancelled;
    default:
      return ExitCodes.failed;
  }
}

/** A sandbox command's end as the CLI's exit code: its own code, or 124 / 130 / 125 as exec documents. */
export function exitCodeForCommand(result: {
  timedOut: boolean;
  cancelled?: boolean | undefined;
  exitCode: number | null;
}): number {
  if (result.timedOut) return ExitCodes.timedOut;
  if (result.cancelled) return ExitCodes.cancelled;
  return result.exitCode ?? ExitCodes.execFailed;
}
