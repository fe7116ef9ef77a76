import type { RedisClient } from '@sandstream/bus';

/**
 * Once a service is shutting down, a Redis that is not there is not waited for. A connection
 * with `maxRetriesPerRequest: null` (workers, blocking reads: the relay, the log archiver) keeps
 * every command in its offline queue until Redis comes back, so a loop that awaits one never
 * sees its abort signal, and `quit()` queues behind them. Called when shutdown begins: a
 * connection that is not connected now, or that loses its connection later, is ended at once;
 * the commands it holds fail, the loops see their signal, and work in flight is taken over by
 * another replica after its lock lapses, as after a crash. A connected one is left alone, so
 * in-flight work finishes normally while Redis answers.
 */
export function dropWhenOffline(client: RedisClient): void {
  if (client.status === 'ready') client.once('close', () => endNow(client));
  else endNow(client);
}

/** Ends the connection and fails every command it holds. */
function endNow(client: RedisClient): void {
  if (client.status === 'end') return;
  if (client.status === 'reconnecting') {
    // Between two attempts ioredis's disconnect() only cancels the next one and leaves the
    // queued commands pending for good; ended at its next attempt (within its retry delay, 2 s
    // at most by default), it fails them.
    client.once('connecting', () => client.disconnect());
    return;
  }
  client.disconnect();
}

/**
 * The last step for a connection: QUIT when connected (replies still owed arrive first), bounded
 * by `timeoutMs` for a Redis that stopped answering; otherwise, and after the bound, disconnect.
 */
export async function closeRedis(client: RedisClient, timeoutMs = 2000): Promise<void> {
  if (client.status !== 'ready') {
    endNow(client);
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
  });
  await Promise.race([client.quit().catch(() => undefined), bound]);
  clearTimeout(timer);
  // A no-op once QUIT has ended the connection.
  endNow(client);
}
