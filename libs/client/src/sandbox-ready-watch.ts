import type { KeySpace, RedisClient, SandboxRecord } from '@sandstream/bus';
import type { ReaderPool } from './reader-pool.js';
import { isReady, notReadyError } from './sandbox-wait.js';

/** How often, by default, a readiness wait reads the record without having been woken. */
export const READY_RECHECK_MS = 1000;

/** How long past its block time a blocking read may stay unanswered before it is dropped. */
const STUCK_READ_MARGIN_MS = 5000;

/** What a readiness wait over Redis needs: the client's connection, keys and blocking readers. */
export interface ReadyWatchContext {
  redis: RedisClient;
  keys: KeySpace;
  /** Blocking readers of readiness waits only, so waiting creates never hold up command output. */
  readers: ReaderPool;
  /**
   * How long one blocking read waits before the record is read anyway: the safety net for a
   * wake-up that never came (a Redis restart, a trimmed stream), never the way a wait ends
   * normally.
   */
  recheckMs: number;
}

type StreamReply = [string, [string, string[]][]][] | null;

/**
 * Waits until a sandbox takes commands, woken by its events stream rather than by polling: the
 * step-dispatcher appends a `ready` entry in the script that opens it (dispatch-open-3.lua), and
 * every state change appends a `job` entry. Race-free: the stream's last id is read before the
 * record (same connection, in that order), and the blocking read starts from that id, so an
 * entry written after the record was read is always seen. Any entry only wakes the wait, which
 * then reads the record (the stream is the sandbox's to write too). Throws when the sandbox
 * ended, is unknown or `timeoutSeconds` passed first; answers the ready record it read, so a
 * caller that answers with it need not read it again.
 */
export async function waitReadyByEvent(
  ctx: ReadyWatchContext,
  get: (id: string) => Promise<SandboxRecord | null>,
  id: string,
  timeoutSeconds: number | undefined,
  signal: AbortSignal | undefined,
): Promise<SandboxRecord> {
  const deadline =
    timeoutSeconds === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutSeconds * 1000;
  const events = ctx.keys.sandbox(id).events;
  // Sent in this order on one connection (both keys in the job's slot), so Redis runs them so.
  const [last, first] = await Promise.all([ctx.redis.xrevrange(events, '+', '-', 'COUNT', 1), get(id)]);
  let sandbox = first as SandboxRecord;
  if (isReady(id, first)) return sandbox;
  let cursor = last[0]?.[0] ?? '0-0';
  let reader = await ctx.readers.acquire();
  let broken = false;
  // A blocked read cannot be withdrawn: an abort drops its connection (the pool opens another).
  const onAbort = () => {
    broken = true;
    reader.disconnect();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      const left = deadline - Date.now();
      if (left < 0) throw notReadyError(id, timeoutSeconds, sandbox);
      const block = Math.max(1, Math.min(ctx.recheckMs, Math.ceil(left)));
      let reply: StreamReply = null;
      // A read on a connection that never answers (one that never became ready, or hung) would
      // hold the wait past its deadline: past its block time and a margin it is dropped, and the
      // wait goes on with a fresh reader after reading the record.
      let stuck = false;
      const watchdog = setTimeout(() => {
        stuck = true;
        reader.disconnect();
      }, block + STUCK_READ_MARGIN_MS);
      try {
        reply = (await reader.xread('COUNT', 100, 'BLOCK', block, 'STREAMS', events, cursor)) as StreamReply;
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? new Error('aborted');
        if (!stuck) {
          broken = true;
          throw err;
        }
      } finally {
        clearTimeout(watchdog);
      }
      if (stuck) {
        ctx.readers.release(reader, true);
        reader = await ctx.readers.acquire();
      }
      const entries = reply?.[0]?.[1] ?? [];
      cursor = entries.at(-1)?.[0] ?? cursor;
      const now = await get(id);
      sandbox = now as SandboxRecord;
      if (isReady(id, now)) return sandbox;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    ctx.readers.release(reader, broken);
  }
}
