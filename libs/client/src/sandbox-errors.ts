import type { SandboxEndReason, SandboxState } from '@sandstream/bus';
import type { ExecResult } from './command-output.js';

/** No sandbox has this id (or it is a job's). The CLI exits 4, as for a job. */
export class SandboxNotFoundError extends Error {
  override readonly name = 'SandboxNotFoundError';
  constructor(readonly sandboxId: string) {
    super(`sandbox ${sandboxId} not found`);
  }
}

/** The sandbox has no such command (never, or it fell out of the bounded history). */
export class SandboxCommandNotFoundError extends Error {
  override readonly name = 'SandboxCommandNotFoundError';
  constructor(
    readonly sandboxId: string,
    readonly commandId: string,
    /** Why, when it is more than unknown (a process that already ended). */
    detail?: string,
  ) {
    super(detail ?? `sandbox ${sandboxId} has no command ${commandId}`);
  }
}

/** The sandbox is closing, closed or failed: it takes no more commands. */
export class SandboxClosedError extends Error {
  override readonly name: string = 'SandboxClosedError';
  constructor(
    readonly sandboxId: string,
    readonly state: SandboxState,
    readonly reason: SandboxEndReason | undefined,
    detail?: string,
  ) {
    super(`sandbox ${sandboxId} is ${state}${reason ? ` (${reason})` : ''}${detail ? `: ${detail}` : ''}`);
  }
}

/**
 * The sandbox is paused (or pausing): it keeps its id and files but runs nowhere. Resume it with
 * `sandbox.resume()`, `client.sandboxes.resume(id)` or `connect(id, { resume: true })`.
 */
export class SandboxPausedError extends SandboxClosedError {
  override readonly name = 'SandboxPausedError';
  constructor(sandboxId: string, state: 'paused' | 'pausing') {
    super(
      sandboxId,
      state,
      undefined,
      'resume it with sandbox.resume(), client.sandboxes.resume(id) or connect(id, { resume: true })',
    );
  }
}

/** The id asked for is taken by a job or by another tenant's sandbox. */
export class SandboxConflictError extends Error {
  override readonly name: string = 'SandboxConflictError';
}

/**
 * The sandbox cannot pause where it runs (its backend cannot capture its files, or there is no
 * snapshot store); nothing was changed, it is still ready.
 */
export class SandboxPauseUnsupportedError extends SandboxConflictError {
  override readonly name = 'SandboxPauseUnsupportedError';
  constructor(
    readonly sandboxId: string,
    readonly why: string,
  ) {
    super(`sandbox ${sandboxId} cannot pause: ${why}`);
  }
}

/** The sandbox did not become ready within the caller's timeout (it may still). */
export class SandboxTimeoutError extends Error {
  override readonly name = 'SandboxTimeoutError';
}

/** A command or file over a limit (wire message size, file size): refused before it ran. */
export class SandboxLimitError extends Error {
  override readonly name = 'SandboxLimitError';
}

/** The caller's AbortSignal cancelled the command; its process tree was killed. */
export class CommandCancelledError extends Error {
  override readonly name = 'CommandCancelledError';
  constructor(readonly result: ExecResult) {
    super(`command ${result.commandId} was cancelled`);
  }
}

/**
 * A file operation the agent refused or could not do (no such file, too large, not a
 * directory …), with the agent's error code and message.
 */
export class SandboxFileError extends Error {
  override readonly name = 'SandboxFileError';
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/**
 * The code interpreter could not run a cell at all (as opposed to a cell that raised, which is
 * the Execution's `error`): no python3 or node in the image, too many contexts, a context of
 * another language. The agent's error code and message.
 */
export class SandboxCodeError extends Error {
  override readonly name = 'SandboxCodeError';
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/** No snapshot has this id for the caller's tenant (another tenant's is answered the same). The CLI exits 4. */
export class SnapshotNotFoundError extends Error {
  override readonly name = 'SnapshotNotFoundError';
  constructor(readonly snapshotId: string) {
    super(`snapshot ${snapshotId} not found`);
  }
}

/** A snapshot's stored bytes are damaged or truncated: the message names what is wrong. Nothing was restored. */
export class SnapshotCorruptError extends Error {
  override readonly name = 'SnapshotCorruptError';
}
