import { Limits, readAhead, type SandboxKeys, transferKey } from '@sandstream/wire';

import type { Redis } from 'ioredis';

/**
 * The Redis side of an upload or download: a tar stream in chunks on the transfer's own list
 * (wire transferKey), an empty value at its end. A reader blocks on its own connection (the
 * agent's others are busy blocking on `:in` and `:control`); a writer keeps at most
 * transferWindowChunks in the list, so a slow reader slows the writer instead of filling Redis.
 */
export class TransferChannel {
  constructor(
    private readonly keys: SandboxKeys,
    /** A fresh connection as the agent's own Redis user, closed after the transfer. */
    private readonly connect: () => Redis,
  ) {}

  /** The chunks, until the end marker; throws when the sender stays silent past the idle limit. */
  async *receive(transferId: string, signal: AbortSignal): AsyncGenerator<Buffer> {
    const key = transferKey(this.keys, transferId);
    const redis = this.connect();
    const abort = () => redis.disconnect();
    signal.addEventListener('abort', abort, { once: true });
    try {
      for (;;) {
        const popped = await redis.brpopBuffer(key, Limits.transferIdleSeconds);
        if (!popped) throw new Error(`no data for ${Limits.transferIdleSeconds} s: the sender went away`);
        if (popped[1].length === 0) return;
        yield popped[1];
      }
    } finally {
      signal.removeEventListener('abort', abort);
      redis.disconnect();
    }
  }

  /** Sends `chunks` (each at most transferChunkBytes), then the end marker. */
  async send(transferId: string, chunks: AsyncIterable<Buffer>, signal: AbortSignal): Promise<void> {
    const key = transferKey(this.keys, transferId);
    const redis = this.connect();
    try {
      // The list's length after a push says whether the window is full: one round trip per
      // chunk while the reader keeps up, a wait for it to take one when it does not.
      let waiting = 0;
      for await (const chunk of readAhead(chunks)) {
        const waitingSince = Date.now();
        while (waiting >= Limits.transferWindowChunks) {
          if (signal.aborted) throw new Error('cancelled');
          if (Date.now() - waitingSince > Limits.transferIdleSeconds * 1000) {
            throw new Error(`the reader took nothing for ${Limits.transferIdleSeconds} s: it went away`);
          }
          await new Promise((resolve) => setTimeout(resolve, 5));
          waiting = await redis.llen(key);
        }
        // A transfer nobody finishes must not stay in Redis: the expiry rides with each push.
        // Two commands back to back, one round trip: a pipeline would copy the chunk once more.
        [waiting] = await Promise.all([
          redis.lpush(key, chunk),
          redis.expire(key, Limits.transferIdleSeconds * 10),
        ]);
      }
      await redis.lpush(key, Buffer.alloc(0));
      await redis.expire(key, Limits.transferIdleSeconds * 10);
    } finally {
      redis.disconnect();
    }
  }
}
