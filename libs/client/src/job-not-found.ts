/**
 * The job has no record. `vanished` says it existed while we watched it and then disappeared —
 * what a Redis restarted without its data (or a flushed database) looks like — as opposed to an
 * id that never named a job. The CLI maps it to its "not found" exit code.
 */
export class JobNotFoundError extends Error {
  override readonly name = 'JobNotFoundError';

  constructor(
    readonly jobId: string,
    readonly vanished: boolean,
  ) {
    super(vanished ? `job ${jobId} not found (Redis lost its data?)` : `job ${jobId} not found`);
  }
}

/**
 * True for errors of the connection itself (Redis down, restarting, loading its AOF), after
 * which the same call may succeed later — as opposed to a reply Redis gave on purpose.
 */
export function isTransientRedisError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'MaxRetriesPerRequestError') return true;
  return /LOADING|Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTCONN|ENOTFOUND/.test(
    err.message,
  );
}
