import { randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import { chunkPieces, Limits, type RawListConnection, readAhead, transferKey } from '@sandstream/wire';
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
  const expire = Limits.transferIdleSeconds * 10;
  let over = false;
  const end = () => {
    over = true;
  };
  done.then(end, end);
  const redis = await openTransferConnection(ctx.redis, key);
  try {
    // The list's length after a push says whether the window is full: one round trip per
    // chunk while the agent keeps up, a wait for it to take one when it does not.
    let waiting = 0;
    for await (const chunk of readAhead(chunkPieces(tar))) {
      while (!over && waiting >= Limits.transferWindowChunks) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        waiting = await redis.llen(key);
      }
      if (over) return;
      waiting = await redis.push(key, chunk, expire);
    }
    await redis.push(key, [], expire);
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
      const pop = () => {
        const next = connection.pop(key, 1);
        next.catch(() => {}); // read below, or dropped with the connection when we stop
        return next;
      };
      let next = pop();
      for (;;) {
        const popped = await next;
        if (!popped) {
          // The agent's step ended without an end marker (it failed): stop waiting.
          if (over && (await connection.llen(key)) === 0)
            throw new Error('the download ended before its data');
          next = pop();
          continue;
        }
        if (popped.length === 0) break;
        next = pop();
        // Back-pressure: the agent waits on the list's length, so reading slower slows it.
        // Joined: one 1 MiB copy costs less than the unpacker's sixteen writes of 64 KiB pieces.
        const chunk = popped.length === 1 ? (popped[0] as Buffer) : Buffer.concat(popped);
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
