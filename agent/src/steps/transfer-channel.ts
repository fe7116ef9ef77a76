import { Limits, type RawListConnection, readAhead, type SandboxKeys, transferKey } from '@sandstream/wire';

/**
 * The Redis side of an upload or download: a tar stream in chunks on the transfer's own list
 * (wire transferKey), an empty value at its end. Each transfer opens a connection of its own as
 * this sandbox's Redis user (the agent's others are busy blocking on `:in` and `:control`): a
 * RawListConnection, which neither copies a chunk on its way out nor joins one on its way in. A
 * writer keeps at most transferWindowChunks in the list, so a slow reader slows the writer
 * instead of filling Redis.
 */
export class TransferChannel {
  constructor(
    private readonly keys: SandboxKeys,
    /** A fresh connection as the agent's own Redis user, closed after the transfer. */
    private readonly connect: () => Promise<RawListConnection>,
  ) {}

  /**
   * The tar stream's chunks until the end marker; throws when the sender stays silent past the
   * idle limit. The next chunk is asked for while this one is consumed.
   */
  async *receive(transferId: string, signal: AbortSignal): AsyncGenerator<Buffer> {
    const key = transferKey(this.keys, transferId);
    const redis = await this.connect();
    const abort = () => redis.close();
    signal.addEventListener('abort', abort, { once: true });
    try {
      let next = redis.pop(key, Limits.transferIdleSeconds);
      for (;;) {
        const popped = await next;
        if (!popped) throw new Error(`no data for ${Limits.transferIdleSeconds} s: the sender went away`);
        if (popped.length === 0) return;
        next = redis.pop(key, Limits.transferIdleSeconds);
        // Rejected when we stop early (the connection is closed below): nobody waits for it then.
        next.catch(() => {});
        // Joined: one 1 MiB copy costs less than the unpacker's sixteen writes of 64 KiB pieces
        // (measured: the agent's CPU per 200 MB upload doubled when it was fed the pieces).
        yield popped.length === 1 ? (popped[0] as Buffer) : Buffer.concat(popped);
      }
    } finally {
      signal.removeEventListener('abort', abort);
      redis.close();
    }
  }

  /** Sends `chunks` (each at most transferChunkBytes, as its pieces), then the end marker. */
  async send(transferId: string, chunks: AsyncIterable<Buffer[]>, signal: AbortSignal): Promise<void> {
    const key = transferKey(this.keys, transferId);
    const redis = await this.connect();
    const expire = Limits.transferIdleSeconds * 10;
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
        waiting = await redis.push(key, chunk, expire);
      }
      await redis.push(key, [], expire);
    } finally {
      redis.close();
    }
  }
}
