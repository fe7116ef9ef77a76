import { mkdir, stat } from 'node:fs/promises';
import type { DownloadStep, UnpackOptions, UploadStep } from '@sandstream/wire';
import { chunkPieces, overLimit, packTree, unpackTar } from '@sandstream/wire/lean';
import { fsFailure } from './fs-errors.js';
import { failed, succeeded } from './outcome.js';
import { resolveStepPath } from './resolve-path.js';
import type { StepContext, StepOutcome } from './step-context.js';
import type { TransferChannel } from './transfer-channel.js';

class TransferLimitError extends Error {}

/** Counts the bytes going through (a buffer, or a chunk as its pieces), failing past `maxBytes`. */
async function* bounded<T extends Buffer | Buffer[]>(
  source: AsyncIterable<T>,
  maxBytes: number,
  counted: { bytes: number },
): AsyncGenerator<T> {
  for await (const chunk of source) {
    counted.bytes += Buffer.isBuffer(chunk)
      ? chunk.length
      : chunk.reduce((sum, piece) => sum + piece.length, 0);
    if (counted.bytes > maxBytes)
      throw new TransferLimitError(overLimit('the transfer', counted.bytes, maxBytes));
    yield chunk;
  }
}

/** Unpacks the tar stream a client sends into the directory `path` (created when missing): wire unpackTar. */
export async function uploadStep(
  step: UploadStep,
  ctx: StepContext,
  channel: Pick<TransferChannel, 'receive'>,
  unpack: UnpackOptions = {},
): Promise<StepOutcome> {
  const dest = resolveStepPath(ctx, step.workingDirectory, step.path);
  const counted = { bytes: 0 };
  let files: number;
  try {
    await mkdir(dest, { recursive: true });
    files = await unpackTar(
      bounded(channel.receive(step.transfer, ctx.signal), step.maxBytes, counted),
      dest,
      unpack,
    );
  } catch (err) {
    return transferFailure(err, ctx, 'path', dest);
  }
  return succeeded({ kind: 'upload', path: dest, bytes: counted.bytes, files });
}

/** Packs `path` (a file or a directory, as the tar's top entry) into the transfer list. */
export async function downloadStep(
  step: DownloadStep,
  ctx: StepContext,
  channel: TransferChannel,
): Promise<StepOutcome> {
  const source = resolveStepPath(ctx, step.workingDirectory, step.path);
  const counted = { bytes: 0 };
  let files = 0;
  try {
    await stat(source);
    const tar = await packTree(source, () => {
      files += 1;
    });
    // Its errors reach the loop below through the iteration; a late one must not crash the agent.
    tar.on('error', () => {});
    await channel.send(step.transfer, bounded(chunkPieces(tar), step.maxBytes, counted), ctx.signal);
  } catch (err) {
    return transferFailure(err, ctx, 'path', source);
  }
  return succeeded({ kind: 'download', path: source, bytes: counted.bytes, files });
}

function transferFailure(err: unknown, ctx: StepContext, field: string, where: string): StepOutcome {
  if (ctx.signal.aborted) return { ...failed('cancelled', 'the transfer was cancelled'), cancelled: true };
  if (err instanceof TransferLimitError) return failed('limit_exceeded', err.message);
  const known = fsFailure(err, field, where);
  if (known) return known;
  return failed('io_error', `the transfer failed: ${(err as Error).message}`);
}
