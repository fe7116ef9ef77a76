import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, realpath, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { WriteFileStep } from '@sandstream/wire';
import { Limits } from '@sandstream/wire/lean';
import { fsFailure } from './fs-errors.js';
import { failed, succeeded } from './outcome.js';
import { resolveStepPath } from './resolve-path.js';
import type { StepContext, StepOutcome } from './step-context.js';

// Standard alphabet, optional padding; whitespace (line-wrapped base64) is removed first.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Writes a file atomically: the content goes to a temporary file in the target's directory,
 * is flushed, then renamed over the target, so a reader (or a crash) sees the old file or the
 * new one, never half of it. Missing parent directories are created. The mode is the step's,
 * else the replaced file's, else the default (0666 minus umask).
 */
export async function writeFileStep(
  step: WriteFileStep,
  ctx: StepContext,
  maxBytes: number = Limits.writeFileMaxBytes,
): Promise<StepOutcome> {
  const requested = resolveStepPath(ctx, step.workingDirectory, step.path);
  const content = decode(step.content, step.encoding);
  if (typeof content === 'string') return failed('invalid_step', content);
  if (content.length > maxBytes) {
    return failed(
      'limit_exceeded',
      `content is ${content.length} bytes, over the writeFile limit of ${maxBytes} bytes`,
    );
  }

  try {
    const existing = await existingTarget(requested);
    if (existing?.isDirectory) return failed('invalid_step', `path ${requested} is a directory`);
    const target = existing?.realPath ?? requested;
    const directory = path.dirname(target);
    const made = await makeDirectory(directory);
    if (made) return made;
    const mode = step.mode ?? existing?.mode;
    await writeAtomically(target, content, mode);
    return succeeded({ kind: 'writeFile', path: requested, bytesWritten: content.length });
  } catch (err) {
    const known = fsFailure(err, 'path', requested);
    if (known) return known;
    throw err;
  }
}

function decode(content: string, encoding: 'utf8' | 'base64'): Buffer | string {
  if (encoding === 'utf8') return Buffer.from(content, 'utf8');
  const compact = content.replace(/\s+/g, '');
  // Buffer.from(…, 'base64') skips characters it does not know; refuse them instead of writing garbage.
  if (!BASE64.test(compact) || compact.length % 4 === 1) {
    return 'content is not valid base64 (encoding is "base64")';
  }
  return Buffer.from(compact, 'base64');
}

/** What we need to know about a file we are about to replace; null when there is none. */
async function existingTarget(
  target: string,
): Promise<{ isDirectory: boolean; mode: number; realPath: string } | null> {
  try {
    const link = await lstat(target);
    // Replacing a symlink by renaming would cut the link; write where it points instead.
    const realPath = link.isSymbolicLink() ? await realpath(target) : target;
    const info = link.isSymbolicLink() ? await stat(target) : link;
    return { isDirectory: info.isDirectory(), mode: info.mode & 0o7777, realPath };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Nothing there (or a dangling symlink: write to the name itself). ENOTDIR: a parent is a
    // file, which makeDirectory reports with a clearer message.
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw err;
  }
}

async function makeDirectory(directory: string): Promise<StepOutcome | null> {
  try {
    await mkdir(directory, { recursive: true });
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR') {
      return failed('invalid_step', `cannot create directory ${directory}: a part of it is a file`);
    }
    throw err;
  }
}

async function writeAtomically(target: string, content: Buffer, mode: number | undefined): Promise<void> {
  const temp = path.join(
    path.dirname(target),
    `.${path.basename(target)}.${randomBytes(6).toString('hex')}.tmp`,
  );
  // 'wx' fails if the name exists, so we never clobber another writer's temp file.
  const handle = await open(temp, 'wx', mode ?? 0o666);
  try {
    try {
      // chmod after open: the mode given to open() is reduced by the umask, an explicit mode is not.
      if (mode !== undefined) await handle.chmod(mode);
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, target);
  } catch (err) {
    await unlink(temp).catch(() => {});
    throw err;
  }
}
