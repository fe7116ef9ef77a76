import { stat } from 'node:fs/promises';
import { failed } from './outcome.js';
import type { StepOutcome } from './step-context.js';

/**
 * Maps a file-system error to a result, naming what the step asked for. Errors nobody expects
 * are not mapped here: they travel up to executeStep, which reports them as `internal`.
 */
export function fsFailure(err: unknown, what: string, target: string): StepOutcome | null {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case 'ENOENT':
      return failed('not_found', `${what} ${target} does not exist`);
    case 'ENOTDIR':
      return failed('not_found', `${what} ${target} does not exist (a parent is not a directory)`);
    case 'EACCES':
    case 'EPERM':
      return failed('io_error', `${what} ${target}: permission denied`);
    case 'EISDIR':
      return failed('invalid_step', `${what} ${target} is a directory`);
    case 'ELOOP':
      return failed('io_error', `${what} ${target}: too many levels of symbolic links`);
    case 'ENAMETOOLONG':
      return failed('invalid_step', `${what} ${target}: name too long`);
    case 'ENOSPC':
    case 'EDQUOT':
      return failed('io_error', `${what} ${target}: no space left on device`);
    case 'EROFS':
      return failed('io_error', `${what} ${target}: read-only file system`);
    case 'EMFILE':
    case 'ENFILE':
      return failed('io_error', `${what} ${target}: too many open files`);
    case 'ERR_INVALID_ARG_VALUE':
    case 'ERR_INVALID_ARG_TYPE':
      // Node refuses paths containing NUL bytes before asking the kernel.
      return failed('invalid_step', `${what} is not a valid path: ${(err as Error).message}`);
    default:
      return null;
  }
}

/** Null when `dir` is a directory; else the failure of a step that asked for one at `path`. */
export async function notADirectory(dir: string): Promise<StepOutcome | null> {
  try {
    const info = await stat(dir);
    return info.isDirectory() ? null : failed('invalid_step', `path ${dir} is not a directory`);
  } catch (err) {
    const known = fsFailure(err, 'path', dir);
    if (known) return known;
    throw err;
  }
}
