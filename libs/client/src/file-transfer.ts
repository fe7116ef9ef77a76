import { randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import {
  chunkPieces,
  Limits,
  popTransferChunks,
  pushTransferChunks,
  type RawListConnection,
  readAhead,
  transferKey,
} from '@sandstream/wire';
import type { CommandRunnerContext } from './command-runner.js';
import { openTransferConnection } from './transfer-connection.js';

/** A fresh id for a transfer's list (under the sandbox's own key prefix). */
export function newTransferId(): string {
  return randomBytes(12).toString('hex');
}

/**
 * Streams a tar into a sandbox's transfer list for its agent's upload step: chunked, at most
 * transferWindowChunks waiting (the sender waits for the agent), an empty value at the end. On a
 * connection of its own that writes each chunk's pieces to the socket as they are (no copy).
 * Stops when `done` settles first (the agent refused or failed the upload).
 */
export async function sendTar(
  ctx: CommandRunnerContext,
  sandboxId: string,
  transferId: string,
  tar: Readable,
  done: Promise<unknown>,
): Promise<void> {
  const key = transferKey(ctx.keys.sandbox(sandboxId), transferId);
  let over = false;
  const end = () => {
    over = true;
  };
  done.then(end, end);
  const redis = await openTransferConnection(ctx.redis, key);
  try {
    await pushTransferChunks(redis, key, readAhead(chunkPieces(tar)), { stopped: () => over });
  } finally {
    tar.destroy();
    if (over) await redis.unlink(key).catch(() => {});
    redis.close();
  }
}

/**
 * The tar a sandbox's agent sends for a download step, as a stream: read from the transfer list
 * on a connection of its own until the end marker, the next chunk asked for while one is unpacked.
 */
export function receiveTar(
  ctx: CommandRunnerContext,
  sandboxId: string,
  transferId: string,
  done: Promise<unknown>,
): Readable {
  const key = transferKey(ctx.keys.sandbox(sandboxId), transferId);
  // Room for two chunks while the one before is unpacked.
  const out = new PassThrough({ highWaterMark: 2 * Limits.transferChunkBytes });
  let over = false;
  const end = () => {
    over = true;
  };
  done.then(end, end);
  void (async () => {
    let reader: RawListConnection | undefined;
    try {
      reader = await openTransferConnection(ctx.redis, key);
      const connection = reader;
      const chunks = popTransferChunks(connection, key, {
        timeoutSeconds: 1,
        // The agent's step ended without an end marker (it failed): stop waiting.
        onIdle: async () => {
          if (over && (await connection.llen(key)) === 0)
            throw new Error('the download ended before its data');
        },
      });
      for await (const chunk of chunks) {
        // Back-pressure: the agent waits on the list's length, so reading slower slows it.
        if (!out.write(chunk)) await new Promise((resolve) => out.once('drain', resolve));
      }
      out.end();
    } catch (err) {
      out.destroy(err as Error);
    } finally {
      await reader?.unlink(key).catch(() => {});
      reader?.close();
    }
  })();
  return out;
}
