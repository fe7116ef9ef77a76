/**
 * The agent's exit codes, as seeds/000 defines them, so that a pod's or container's exit status
 * alone tells an operator why the agent stopped.
 */
export const ExitCode = {
  /** A shutdown step was received, or SIGTERM/SIGINT asked us to stop and we finished cleanly. */
  ok: 0,
  /** No step arrived within idle-timeout-seconds x max-idle-waits. */
  idle: 2,
  /** Bad configuration or an unrecoverable error (logged to stderr). */
  fatal: 3,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];
