import { decodeEventEntry, type StepEvent } from '@sandstream/wire';
import type { Redis } from 'ioredis';

export interface ArchivingReaderOptions {
  /** Until this step's `completed` event is read. */
  stepId: string;
  /** Called for every event of that step, in stream order. */
  onEvent?: (event: StepEvent) => void;
  /** Give up when nothing arrives for this long. */
  idleMs?: number;
  /** Trim what was read (as the archiver does); false: only read. */
  trim?: boolean;
}

export interface ArchivingReaderReport {
  /** Output lines read (stdout + stderr events of the step). */
  lines: number;
  /** The step's `completed` event, or null if the reader gave up first. */
  completed: StepEvent | null;
  /** Wall time from start() until the completed event, ms. */
  elapsedMs: number;
}

/**
 * A stand-in for the log archiver in tests and benchmarks: reads a job's events stream from its
 * start with XREAD and, after each batch, trims everything before the last entry read with
 * `XTRIM MINID`, which is what gives an agent running with --log-archive room to go on.
 */
export async function archivingReader(
  redis: Redis,
  key: string,
  options: ArchivingReaderOptions,
): Promise<ArchivingReaderReport> {
  const started = performance.now();
  const idleMs = options.idleMs ?? 30_000;
  let lastId = '0-0';
  let lines = 0;
  let lastProgress = performance.now();
  for (;;) {
    const reply = await redis.xread('COUNT', 2000, 'BLOCK', 200, 'STREAMS', key, lastId);
    if (!reply) {
      if (performance.now() - lastProgress > idleMs)
        return { lines, completed: null, elapsedMs: performance.now() - started };
      continue;
    }
    lastProgress = performance.now();
    let completed: StepEvent | null = null;
    for (const [, entries] of reply) {
      for (const [id, fields] of entries) {
        lastId = id;
        for (const event of decodeEventEntry(fields)) {
          if (event.stepId !== options.stepId) continue;
          if (event.kind === 'stdout' || event.kind === 'stderr') lines += 1;
          options.onEvent?.(event);
          if (event.kind === 'completed') completed = event;
        }
      }
    }
    // Entries below MINID go; the last one read stays (XREAD continues after it anyway).
    if (options.trim !== false) await redis.xtrim(key, 'MINID', lastId);
    if (completed) return { lines, completed, elapsedMs: performance.now() - started };
  }
}
