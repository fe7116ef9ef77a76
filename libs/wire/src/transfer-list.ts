import { Limits } from './limits.js';
import type { RawListConnection } from './raw-list-connection.js';

/**
 * Pushes a tar stream's chunks (each as its pieces) onto a transfer list, then the end marker:
 * at most transferWindowChunks waiting, so a slow reader slows the writer instead of filling
 * Redis. The list's length after a push says whether the window is full: one round trip per
 * chunk while the reader keeps up, a poll of its length when it does not. Every push carries the
 * list's expiry, so a transfer nobody finishes does not stay. Resolves false, without the end
 * marker, when `stopped()` turns true first; with `idleSeconds`, throws once the reader has taken
 * nothing for that long. Both ends of a transfer use it: the SDK's upload, the agent's download.
 */
export async function pushTransferChunks(
  redis: RawListConnection,
  key: string,
  chunks: AsyncIterable<Buffer[]>,
  options: { stopped: () => boolean; idleSeconds?: number },
): Promise<boolean> {
  const expire = Limits.transferIdleSeconds * 10;
  let waiting = 0;
  for await (const chunk of chunks) {
    const waitingSince = Date.now();
    while (!options.stopped() && waiting >= Limits.transferWindowChunks) {
      if (options.idleSeconds !== undefined && Date.now() - waitingSince > options.idleSeconds * 1000) {
        throw new Error(`the reader took nothing for ${options.idleSeconds} s: it went away`);
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
      waiting = await redis.llen(key);
    }
    if (options.stopped()) return false;
    waiting = await redis.push(key, chunk, expire);
  }
  await redis.push(key, [], expire);
  return true;
}

/**
 * A transfer list's chunks until its end marker, each joined into one buffer (one 1 MiB copy
 * costs the unpacker less than sixteen writes of the socket's 64 KiB pieces), the next one asked
 * for while this one is consumed. A pop that waits `timeoutSeconds` in vain calls `onIdle`, which
 * throws to give up or returns to wait on. Both ends of a transfer use it: the agent's upload,
 * the SDK's download.
 */
export async function* popTransferChunks(
  redis: RawListConnection,
  key: string,
  options: { timeoutSeconds: number; onIdle: () => Promise<void> },
): AsyncGenerator<Buffer> {
  const pop = () => {
    const next = redis.pop(key, options.timeoutSeconds);
    // Read below, or dropped with the connection when the consumer stops early.
    next.catch(() => {});
    return next;
  };
  let next = pop();
  for (;;) {
    const popped = await next;
    if (!popped) {
      await options.onIdle();
      next = pop();
      continue;
    }
    if (popped.length === 0) return;
    next = pop();
    yield popped.length === 1 ? (popped[0] as Buffer) : Buffer.concat(popped);
  }
}
