import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import type { ReadFileStep } from '@sandstream/wire';
import { Limits } from '@sandstream/wire/lean';
import { fsFailure } from './fs-errors.js';
import { failed, succeeded } from './outcome.js';
import { resolveStepPath } from './resolve-path.js';
import type { StepContext, StepOutcome } from './step-context.js';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Reads a UTF-8 text file whole. Files over the limit are refused (not truncated: a partial
 * source file silently handed to an AI agent is worse than an error), and so is binary content.
 */
export async function readFileStep(
  step: ReadFileStep,
  ctx: StepContext,
  maxBytes: number = Limits.readFileMaxBytes,
): Promise<StepOutcome> {
  const target = resolveStepPath(ctx, step.workingDirectory, step.path);
  let handle: FileHandle;
  try {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
    handle = await open(target, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const known = fsFailure(err, 'path', target);
    if (known) return known;
    throw err;
  }
  try {
    const info = await handle.stat();
    if (info.isDirectory()) return failed('invalid_step', `path ${target} is a directory, not a file`);
    // FIFOs and devices could block forever or never end (/dev/zero).
    if (!info.isFile()) return failed('invalid_step', `path ${target} is not a regular file`);
    if (info.size > maxBytes) return tooLarge(info.size, maxBytes);
    // Read up to one byte past the limit instead of trusting the size: /proc files claim 0
    // bytes and a file can grow between stat and read.
    const { bytes: buffer, length } = await readUpTo(handle, info.size, maxBytes + 1);
    if (length > maxBytes) {
      return failed(
        'limit_exceeded',
        `file is over ${maxBytes} bytes, the readFile limit (it grew while being read)`,
      );
    }
    const bytes = buffer.subarray(0, length);
    const nul = bytes.indexOf(0);
    if (nul !== -1) {
      return failed(
        'invalid_step',
        `path ${target} looks binary (NUL byte at offset ${nul}); readFile returns text only`,
      );
    }
    let content: string;
    try {
      content = utf8.decode(bytes);
    } catch {
      return failed('invalid_step', `path ${target} is not valid UTF-8 text; readFile returns text only`);
    }
    return succeeded({ kind: 'readFile', path: target, content, sizeBytes: length });
  } catch (err) {
    const known = fsFailure(err, 'path', target);
    if (known) return known;
    throw err;
  } finally {
    await handle.close();
  }
}

/** What the first read asks for when stat reports no size (/proc files). */
const UNKNOWN_SIZE_FIRST_READ = 64 * 1024;

/**
 * Reads until end of file or `cap` bytes, whichever comes first. The buffer starts at the size
 * stat reported plus one byte (to notice a file that grew) and doubles only when the file turns
 * out longer, so a small file costs a small buffer: a 1 MiB buffer per step, zero-filled and
 * held outside the V8 heap, made V8 run a full collection every few readFile steps.
 */
export async function readUpTo(
  handle: FileHandle,
  statSize: number,
  cap: number,
): Promise<{ bytes: Buffer; length: number }> {
  let buffer = Buffer.allocUnsafe(Math.min(cap, statSize > 0 ? statSize + 1 : UNKNOWN_SIZE_FIRST_READ));
  let length = 0;
  for (;;) {
    if (length === buffer.length) {
      if (length >= cap) break;
      const larger = Buffer.allocUnsafe(Math.min(cap, buffer.length * 2));
      buffer.copy(larger, 0, 0, length);
      buffer = larger;
    }
    const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
    if (bytesRead === 0) break;
    length += bytesRead;
  }
  return { bytes: buffer, length };
}

function tooLarge(size: number, maxBytes: number): StepOutcome {
  return failed('limit_exceeded', `file is ${size} bytes, over the readFile limit of ${maxBytes} bytes`);
}
