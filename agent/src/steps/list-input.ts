import type { Redis } from 'ioredis';

/** BRPOP's timeout: how often an input loop looks at whether it should stop. */
const INPUT_POLL_SECONDS = 1;

/**
 * The values clients LPUSH to an input list (a terminal's, a command's stdin), popped from the
 * other end in the order pushed, until `signal` aborts. `reader` is a connection of the caller's
 * own (BRPOP blocks it); aborting disconnects it. Survives a Redis restart: the input waits in
 * the list while ioredis reconnects.
 */
export async function* listInput(reader: Redis, key: string, signal: AbortSignal): AsyncGenerator<Buffer> {
  const stop = () => reader.disconnect();
  signal.addEventListener('abort', stop, { once: true });
  try {
    while (!signal.aborted) {
      let popped: [Buffer, Buffer] | null;
      try {
        popped = await reader.brpopBuffer(key, INPUT_POLL_SECONDS);
      } catch {
        if (signal.aborted) return;
        await new Promise((resolve) => setTimeout(resolve, 200));
        continue;
      }
      if (popped) yield popped[1];
    }
  } finally {
    signal.removeEventListener('abort', stop);
  }
}
