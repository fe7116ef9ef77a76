import { decodeEventEntry } from '@sandstream/wire';
import type { Redis } from 'ioredis';

export interface FollowResult {
  /** stdout/stderr events the follower received. */
  lines: number;
  /** Highest seq seen (lines the step produced, received or not, for agent runs). */
  lastSeq: number;
  /** From start() to the last event (or the completed event). */
  elapsedMs: number;
  droppedLines: number | null;
}

/**
 * Reads a stream the way a log follower would (XREAD BLOCK, large COUNT) until it has seen
 * `expectLines` lines or a completed event, and times it.
 */
export async function follow(
  redis: Redis,
  key: string,
  startedAt: number,
  until: { expectLines?: number; idleMs?: number },
): Promise<FollowResult> {
  let id = '0-0';
  let lines = 0;
  let lastSeq = 0;
  let last = startedAt;
  let droppedLines: number | null = null;
  for (;;) {
    const reply = (await redis.xread('COUNT', 10_000, 'BLOCK', until.idleMs ?? 5000, 'STREAMS', key, id)) as
      | [string, [string, string[]][]][]
      | null;
    if (!reply) return { lines, lastSeq, elapsedMs: last - startedAt, droppedLines };
    const entries = reply[0]?.[1] ?? [];
    for (const [entryId, fields] of entries) {
      id = entryId;
      for (const event of decodeEventEntry(fields)) {
        last = performance.now();
        lastSeq = Math.max(lastSeq, event.seq);
        if (event.kind === 'stdout' || event.kind === 'stderr') lines += 1;
        if (event.kind === 'completed') {
          droppedLines = event.droppedLines ?? 0;
          return { lines, lastSeq, elapsedMs: last - startedAt, droppedLines };
        }
      }
    }
    if (until.expectLines !== undefined && lines >= until.expectLines) {
      return { lines, lastSeq, elapsedMs: last - startedAt, droppedLines };
    }
  }
}
