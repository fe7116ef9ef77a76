import { setImmediate as nextTurn } from 'node:timers/promises';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { decodeEventEntry, decodeEventFields } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { EventPublisher } from './event-publisher.js';
import { createLogger } from './logger.js';
import { eventsPerEntry, MAX_EVENTS_PER_ENTRY, PACE_SHARE, WritePace } from './write-pace.js';

const log = createLogger({ verbose: false, write: () => {} });

describe('WritePace', () => {
  it('grants half the limit per second, a tenth of a second as a burst, and lets a forced write run into debt', () => {
    let now = 1_000;
    const pace = new WritePace({ limitPerSecond: 2_000, now: () => now });
    expect(pace.perSecond).toBe(2_000 * PACE_SHARE);
    // The burst: 100 commands.
    expect(pace.waitMs()).toBe(0);
    expect(pace.take(250)).toBe(100);
    expect(pace.waitMs()).toBe(1);
    // Empty: a write that cannot wait still gets one command, which the next ones wait out.
    expect(pace.take(10)).toBe(1);
    expect(pace.waitMs()).toBe(2);
    now += 2;
    expect(pace.waitMs()).toBe(0);
    expect(pace.take(10)).toBe(1);
    now += 10_000;
    expect(pace.take(1_000)).toBe(100);
    // A forced write takes what it needs.
    expect(pace.take(250, 16)).toBe(16);
  });

  it('is off at 0', () => {
    const pace = new WritePace({ limitPerSecond: 0 });
    expect(pace.paced).toBe(false);
    expect(pace.take(1_000_000)).toBe(1_000_000);
    expect(pace.waitMs()).toBe(0);
  });

  it('packs as evenly as the commands allow', () => {
    expect(eventsPerEntry(250, 250)).toBe(1);
    expect(eventsPerEntry(250, 1_000)).toBe(1);
    expect(eventsPerEntry(250, 100)).toBe(3);
    expect(eventsPerEntry(250, 1)).toBe(250);
  });
});

/** The publisher's buffer: what is left in it when the step ends goes out at once (in the pace's debt). */
const BUFFERED = 2_000;

describe('EventPublisher with a WritePace', () => {
  const own = usePrivateRedis({ maxRetriesPerRequest: null });

  /** Prints `lines` lines as a fast child does (chunks between event-loop turns); returns the stream's entries and elapsed ms. */
  async function print(key: string, lines: number, pace?: WritePace) {
    const events = new EventPublisher({
      redis: own.redis,
      key,
      stepId: 'step-1',
      maxBufferedLines: BUFFERED,
      maxBufferedBytes: 8 * 1024 * 1024,
      // No follower here: a stream long enough to keep every line to be read back.
      streamMaxLength: 1_000_000,
      log,
      ...(pace ? { pace } : {}),
    });
    const started = Date.now();
    events.started();
    for (let i = 1; i <= lines; i++) {
      // As fast as the publisher takes them (an executor that holds when it is full).
      while (!events.accepting()) await new Promise((resolve) => setTimeout(resolve, 1));
      events.line('stdout', String(i));
      if (i % 500 === 0) await nextTurn();
    }
    await events.complete(0).written;
    const elapsedMs = Date.now() - started;
    const entries = await own.redis.xrange(key, '-', '+');
    return { entries, elapsedMs, dropped: events.droppedLines };
  }

  it('keeps its entries per second under its share, packing lines, and delivers every line in order', async () => {
    const lines = 20_000;
    // A limit of 2,000/s: the agent's share is 1,000 commands a second.
    const pace = new WritePace({ limitPerSecond: 2_000 });
    const { entries, elapsedMs, dropped } = await print('pace:paced', lines, pace);
    const events = entries.flatMap(([, fields]) => decodeEventEntry(fields));
    expect(dropped).toBe(0);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: lines + 2 }, (_, i) => i));
    expect(events.slice(1, -1).map((e) => e.line)).toEqual(
      Array.from({ length: lines }, (_, i) => String(i + 1)),
    );
    // Entries (= XADDs): at most the share over the time taken, plus the burst and the step's end
    // (a full buffer, packed as tight as an entry allows).
    const allowed = 100 + (pace.perSecond * elapsedMs) / 1000 + BUFFERED / MAX_EVENTS_PER_ENTRY + 2;
    console.log(
      `[measure] paced: ${lines} lines in ${entries.length} entries over ${elapsedMs} ms (${Math.round((entries.length * 1000) / elapsedMs)}/s; share ${pace.perSecond}/s)`,
    );
    expect(entries.length).toBeLessThanOrEqual(allowed);
    expect(entries.length).toBeLessThan(lines / 5);
    // No entry carries more than MAX_EVENTS_PER_ENTRY.
    expect(Math.max(...entries.map(([, fields]) => fields.length / 2))).toBeLessThanOrEqual(
      MAX_EVENTS_PER_ENTRY,
    );
    // A reader of one event an entry sees the first of each: packed entries start with a real event.
    expect(decodeEventFields(entries[1]?.[1] ?? [])?.kind).toBe('stdout');
  });

  it('holds a step that outruns its share (the executor waits) instead of dropping its lines', async () => {
    // A share of 250 commands a second, at most 4,000 lines a second; a buffer of 100 lines.
    const pace = new WritePace({ limitPerSecond: 500 });
    const events = new EventPublisher({
      redis: own.redis,
      key: 'pace:held',
      stepId: 'step-1',
      maxBufferedLines: 100,
      maxBufferedBytes: 1024 * 1024,
      streamMaxLength: 1_000_000,
      log,
      pace,
    });
    events.started();
    let held = 0;
    const lines = 3_000;
    for (let i = 1; i <= lines; i++) {
      // A child's output comes in chunks, with turns of the event loop between them.
      if (i % 20 === 0) await nextTurn();
      // What the run step's line gate does: wait while holding, drop otherwise.
      if (!events.accepting()) {
        if (events.holding()) {
          held += 1;
          await new Promise<void>((resolve) => events.onceAccepting(resolve));
        } else {
          events.droppedLine();
          continue;
        }
      }
      events.line('stdout', String(i));
    }
    await events.complete(0).written;
    const written = (await own.redis.xrange('pace:held', '-', '+')).flatMap(([, fields]) =>
      decodeEventEntry(fields),
    );
    expect(events.droppedLines).toBe(0);
    expect(held).toBeGreaterThan(0);
    expect(written.filter((e) => e.kind === 'stdout').map((e) => e.line)).toEqual(
      Array.from({ length: lines }, (_, i) => String(i + 1)),
    );
  });

  it('writes one entry a line when the output stays under its share', async () => {
    const pace = new WritePace({ limitPerSecond: 2_000_000 });
    const { entries } = await print('pace:under', 2_000, pace);
    expect(entries.length).toBe(2_002);
  });
});
