import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { Limits, type ReadFileStep } from '@sandstream/wire';
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
  const target = resolveStepPath(ctx.baseDirectory, step.workingDirectory, step.path);
  let handle: Awaited<ReturnType<typeof open>>;
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
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
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

function tooLarge(size: number, maxBytes: number): StepOutcome {
  return failed('limit_exceeded', `file is ${size} bytes, over the readFile limit of ${maxBytes} bytes`);
}
