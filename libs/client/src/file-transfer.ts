import { randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import { Limits, readAhead, rechunk, transferKey } from '@sandstream/wire';
import type { Cluster, Redis } from 'ioredis';
import type { CommandRunnerContext } from './command-runner.js';

/** A fresh id for a transfer's list (under the sandbox's own key prefix). */
export function newTransferId(): string {
  return randomBytes(12).toString('hex');
}

/**
 * Streams a tar into a sandbox's transfer list for its agent's upload step: chunked, at most
 * transferWindowChunks waiting (the sender waits for the agent), an empty value at the end.
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
  try {
    // The list's length after a push says whether the window is full: one round trip per
    // chunk while the agent keeps up, a wait for it to take one when it does not.
    let waiting = 0;
    for await (const chunk of readAhead(rechunk(tar))) {
      while (!over && waiting >= Limits.transferWindowChunks) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        waiting = await ctx.redis.llen(key);
      }
      if (over) return;
      waiting = await pushChunk(ctx.redis, key, chunk);
    }
    await ctx.redis.lpush(key, Buffer.alloc(0));
    await ctx.redis.expire(key, Limits.transferIdleSeconds * 10);
  } finally {
    tar.destroy();
    if (over) await ctx.redis.unlink(key);
  }
}

/**
 * LPUSH with the transfer's expiry, in one round trip: the list's length after it. Two commands
 * written back to back rather than a pipeline: ioredis' pipeline concatenates its commands into
 * one more buffer, a copy of every chunk (measured: ~30 % of the push's CPU).
 */
async function pushChunk(redis: Redis | Cluster, key: string, chunk: Buffer): Promise<number> {
  const [length] = await Promise.all([
    redis.lpush(key, chunk),
    redis.expire(key, Limits.transferIdleSeconds * 10),
  ]);
  return length;
}

/**
 * The tar a sandbox's agent sends for a download step, as a stream: read from the transfer list
 * on a connection of its own until the end marker.
 */
export function receiveTar(
  ctx: CommandRunnerContext,
  sandboxId: string,
  transferId: string,
  done: Promise<unknown>,
): Readable {
  const key = transferKey(ctx.keys.sandbox(sandboxId), transferId);
  // Room for one chunk while the one before is unpacked: the next read is in flight meanwhile.
  const out = new PassThrough({ highWaterMark: 2 * Limits.transferChunkBytes });
  const reader = ctx.redis.duplicate();
  reader.on('error', () => {});
  let over = false;
  const end = () => {
    over = true;
  };
  done.then(end, end);
  void (async () => {
    try {
      for (;;) {
        const popped = await reader.brpopBuffer(key, 1);
        if (!popped) {
          // The agent's step ended without an end marker (it failed): stop waiting.
          if (over && (await ctx.redis.llen(key)) === 0)
            throw new Error('the download ended before its data');
          continue;
        }
        if (popped[1].length === 0) break;
        // Back-pressure: the agent waits on the list's length, so reading slower slows it.
        if (!out.write(popped[1])) await new Promise((resolve) => out.once('drain', resolve));
      }
      out.end();
    } catch (err) {
      out.destroy(err as Error);
    } finally {
      reader.disconnect();
      await ctx.redis.unlink(key).catch(() => {});
    }
  })();
  return out;
}
