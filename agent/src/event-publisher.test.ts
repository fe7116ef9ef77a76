import { RedisServer } from '@sandstream/test-support';
import { decodeEventEntry, Limits, type StepEvent } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventPublisher } from './event-publisher.js';
import { createLogger } from './logger.js';
import { StreamBudget } from './stream-budget.js';

const log = createLogger({ verbose: false, write: () => {} });
let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  server = await RedisServer.start();
  redis = new Redis(server.url, { maxRetriesPerRequest: null });
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

async function eventsOf(key: string): Promise<StepEvent[]> {
  const entries = await redis.xrange(key, '-', '+');
  return entries.flatMap(([, fields]) => decodeEventEntry(fields));
}

function publisher(key: string, overrides: Partial<ConstructorParameters<typeof EventPublisher>[0]> = {}) {
  return new EventPublisher({
    redis,
    key,
    stepId: 'step-1',
    maxBufferedLines: 10_000,
    maxBufferedBytes: 8 * 1024 * 1024,
    log,
    ...overrides,
  });
}

describe('EventPublisher', () => {
  it('numbers started 0, each line, then completed, in order', async () => {
    const events = publisher('ev:order');
    events.started();
    events.line('stdout', 'a');
    events.line('stderr', 'b');
    await events.complete(0).written;
    const written = await eventsOf('ev:order');
    expect(written.map((e) => [e.kind, e.seq, e.line])).toEqual([
      ['started', 0, undefined],
      ['stdout', 1, 'a'],
      ['stderr', 2, 'b'],
      ['completed', 3, undefined],
    ]);
    expect(written[3]).toMatchObject({ exitCode: 0, droppedLines: 0 });
  });

  it('sends a code result between the lines around it, in pieces of a line’s size, taking no seq', async () => {
    const events = publisher('ev:result');
    events.started();
    events.line('stdout', 'before');
    const png = 'A'.repeat(40_000);
    expect(events.result(0, { png, isMainResult: false })).toBe(true);
    events.line('stdout', 'after');
    await events.complete(0).written;
    const written = await eventsOf('ev:result');
    expect(written.map((e) => [e.kind, e.seq, e.codeResult?.piece])).toEqual([
      ['started', 0, undefined],
      ['stdout', 1, undefined],
      ['result', 1, 0],
      ['result', 1, 1],
      ['result', 1, 2],
      ['stdout', 2, undefined],
      ['completed', 3, undefined],
    ]);
    const pieces = written.flatMap((e) => (e.codeResult ? [e.codeResult] : []));
    for (const piece of pieces) {
      expect(piece).toMatchObject({ index: 0, pieces: 3 });
      expect(piece.json.length).toBeLessThanOrEqual(Limits.eventLineMaxBytes);
    }
    expect(JSON.parse(pieces.map((p) => p.json).join(''))).toEqual({ png, isMainResult: false });
    // Lines only: a follower counting them sees no gap, and the step's line count is unchanged.
    expect(events.outputLines).toBe(2);
  });

  it('refuses a code result whose pieces do not all fit the buffer, and queues none of them', async () => {
    const events = publisher('ev:result-big', { maxBufferedBytes: 64 * 1024 });
    events.started(false);
    expect(events.result(0, { text: 'x'.repeat(100_000), isMainResult: false })).toBe(false);
    expect(events.result(1, { text: 'small', isMainResult: true })).toBe(true);
    await events.complete(0).written;
    const results = (await eventsOf('ev:result-big')).filter((e) => e.kind === 'result');
    expect(results.map((e) => e.codeResult?.index)).toEqual([1]);
  });

  it('ships a full batch of 50 lines at once, and a lone line only after the batch delay', async () => {
    // A delay long against a loaded machine's jitter, so each rule is told apart by a bound
    // measured against it rather than by a short sleep.
    const delayMs = 2000;
    const events = publisher('ev:batch', { batchDelayMs: delayMs });
    events.started();
    await events.drained();
    const full = Date.now();
    for (let i = 0; i < 50; i++) events.line('stdout', `line ${i}`);
    await expect.poll(() => redis.xlen('ev:batch'), { timeout: delayMs }).toBe(51);
    // Before the delay ran out: the 50-line rule flushed, not the timer.
    expect(Date.now() - full).toBeLessThan(delayMs);
    const lonely = Date.now();
    events.line('stdout', 'lonely');
    expect(await redis.xlen('ev:batch')).toBe(51);
    await expect.poll(() => redis.xlen('ev:batch'), { timeout: delayMs + 10_000 }).toBe(52);
    // The lone line waited for the timer (less a little timer slack), not shipped at once.
    expect(Date.now() - lonely).toBeGreaterThanOrEqual(delayMs - 50);
    await events.complete(0).written;
  });

  it('caps the stream with MAXLEN ~', async () => {
    const events = publisher('ev:cap', { streamMaxLength: 1000, maxBufferedLines: 100_000 });
    events.started();
    for (let i = 0; i < 20_000; i++) events.line('stdout', String(i));
    await events.complete(0).written;
    const length = await redis.xlen('ev:cap');
    expect(length).toBeGreaterThanOrEqual(1000);
    expect(length).toBeLessThan(1200);
    const written = await eventsOf('ev:cap');
    expect(written.at(-1)).toMatchObject({ kind: 'completed', seq: 20_001, droppedLines: 0 });
  });

  it('drops and counts lines instead of buffering while Redis does not answer, leaving seq gaps', async () => {
    const events = publisher('ev:drop', { maxBufferedLines: 200, maxBufferedBytes: 1024 * 1024 });
    events.started();
    await events.drained();
    server.pause();
    try {
      for (let i = 1; i <= 5000; i++) events.line('stdout', `line ${i}`);
      expect(events.buffered.lines).toBeLessThanOrEqual(200);
      expect(events.droppedLines).toBeGreaterThanOrEqual(4800);
    } finally {
      server.resume();
    }
    await events.complete(1).written;
    const written = await eventsOf('ev:drop');
    const completed = written.at(-1);
    expect(completed).toMatchObject({ kind: 'completed', seq: 5001, droppedLines: events.droppedLines });
    const lines = written.filter((e) => e.kind === 'stdout');
    expect(lines.length + events.droppedLines).toBe(5000);
    expect(events.outputLines).toBe(5000);
    // Kept lines are the first ones; the gap after them is where the drops were.
    expect(lines.at(-1)?.seq).toBe(lines.length);
  });

  it('bounds buffered bytes as well as lines', async () => {
    const events = publisher('ev:bytes', { maxBufferedLines: 100_000, maxBufferedBytes: 64 * 1024 });
    events.started();
    await events.drained();
    server.pause();
    try {
      for (let i = 0; i < 1000; i++) events.line('stdout', 'y'.repeat(1000));
      expect(events.buffered.bytes).toBeLessThan(64 * 1024 + 2000);
      expect(events.droppedLines).toBeGreaterThan(900);
    } finally {
      server.resume();
    }
    await events.complete(0).written;
  });
});

describe('EventPublisher: several writes in flight, lines counted without being decoded', () => {
  it('keeps stream order with several pipelined writes in flight on the one connection', async () => {
    const events = publisher('ev:inflight', { maxWriteLines: 7, maxWritesInFlight: 3 });
    events.started();
    for (let i = 1; i <= 500; i++) events.line('stdout', `line ${i}`);
    await events.complete(0).written;
    const all = await eventsOf('ev:inflight');
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 502 }, (_, i) => i));
    expect(all.slice(1, -1).map((e) => e.line)).toEqual(
      Array.from({ length: 500 }, (_, i) => `line ${i + 1}`),
    );
  });

  it('gives a line reported through droppedLine() its seq and counts it, exactly like one dropped by line()', async () => {
    const events = publisher('ev:gate', { maxBufferedLines: 100, maxBufferedBytes: 1024 * 1024 });
    events.started();
    await events.drained();
    server.pause();
    let viaGate = 0;
    try {
      for (let i = 1; i <= 300; i++) {
        if (events.accepting()) events.line('stdout', `line ${i}`);
        else {
          events.droppedLine();
          viaGate += 1;
        }
      }
      // The gate closes exactly when line() would have started dropping.
      expect(events.buffered.lines).toBe(100);
      expect(viaGate).toBe(200);
      expect(events.droppedLines).toBe(200);
      expect(events.outputLines).toBe(300);
    } finally {
      server.resume();
    }
    await events.complete(0).written;
    const all = await eventsOf('ev:gate');
    expect(all.filter((e) => e.kind === 'stdout').map((e) => e.seq)).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    expect(all.at(-1)).toMatchObject({ kind: 'completed', seq: 301, droppedLines: 200 });
  });
});

describe('EventPublisher.finish', () => {
  it('leaves `completed` to the caller, whose pipeline writes it after every line', async () => {
    const events = publisher('ev:finish', { maxWriteLines: 100 });
    events.started();
    // More lines than one pipeline carries, so finish() hands them over in several writes.
    for (let i = 0; i < 250; i++) events.line('stdout', `line ${i}`);
    const { handedOver, written, appendCompleted } = events.finish(0);
    await handedOver;
    const pipeline = redis.pipeline();
    appendCompleted(pipeline);
    pipeline.lpush('ev:finish:after', 'result');
    await Promise.all([written, pipeline.exec()]);
    const all = await eventsOf('ev:finish');
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 252 }, (_, i) => i));
    expect(all.at(-1)).toMatchObject({ kind: 'completed', seq: 251, exitCode: 0, droppedLines: 0 });
  });

  it("writes a quick step as one entry (started, its last lines, completed) in the caller's pipeline", async () => {
    const events = publisher('ev:quick');
    events.started();
    events.line('stdout', 'a');
    // Ends within STARTED_HOLD_MS: nothing has been written on its own.
    const { handedOver, written, appendCompleted } = events.finish(0);
    await handedOver;
    const pipeline = redis.pipeline();
    appendCompleted(pipeline);
    pipeline.lpush('ev:quick:after', 'result');
    await Promise.all([written, pipeline.exec()]);
    const entries = await redis.xrange('ev:quick', '-', '+');
    expect(entries).toHaveLength(1);
    expect(decodeEventEntry(entries[0]![1]).map((e) => [e.kind, e.seq])).toEqual([
      ['started', 0],
      ['stdout', 1],
      ['completed', 2],
    ]);
    expect(await redis.lrange('ev:quick:after', 0, -1)).toEqual(['result']);
  });

  it('writes `started` on its own once a step runs past STARTED_HOLD_MS', async () => {
    const events = publisher('ev:slow');
    events.started();
    await expect.poll(() => redis.xlen('ev:slow'), { timeout: 10_000 }).toBe(1);
    expect((await eventsOf('ev:slow'))[0]).toMatchObject({ kind: 'started', seq: 0 });
    const { handedOver, appendCompleted } = events.finish(0);
    await handedOver;
    const pipeline = redis.pipeline();
    appendCompleted(pipeline);
    await pipeline.exec();
    expect((await eventsOf('ev:slow')).map((e) => e.kind)).toEqual(['started', 'completed']);
  });

  it('reports lines dropped before the end in the completed event it appends', async () => {
    const events = publisher('ev:finish-dropped', { maxBufferedLines: 100 });
    events.started();
    for (let i = 0; i < 150; i++) events.line('stdout', 'x');
    const { handedOver, appendCompleted } = events.finish(3);
    await handedOver;
    const pipeline = redis.pipeline();
    appendCompleted(pipeline);
    await pipeline.exec();
    await events.drained();
    const all = await eventsOf('ev:finish-dropped');
    const completed = all.at(-1);
    expect(completed).toMatchObject({ kind: 'completed', seq: 151, exitCode: 3 });
    expect(completed?.droppedLines).toBe(events.droppedLines);
    expect(events.droppedLines).toBeGreaterThan(0);
  });

  describe('with the log archive on (a StreamBudget)', () => {
    it('stops accepting at the high water mark and holds instead of dropping, until the stream is trimmed', async () => {
      const key = `ev:budget-${Date.now()}`;
      const budget = new StreamBudget({ redis, key, highWater: 100, log, pollMs: 10 });
      const events = publisher(key, { budget });
      events.started();
      let sent = 0;
      while (events.accepting()) {
        events.line('stdout', String(++sent));
      }
      expect(events.holding()).toBe(true);
      // The started event and 99 lines: the mark counts what is in flight too.
      expect(sent).toBe(99);
      await events.drained();
      expect(await redis.xlen(key)).toBe(100);
      expect(events.accepting()).toBe(false);
      const room = new Promise<void>((resolve) => events.onceAccepting(resolve));
      // The archiver's trim is the only thing that makes room; the budget notices by polling.
      await redis.xtrim(key, 'MAXLEN', 50);
      await room;
      expect(events.accepting()).toBe(true);
      expect(events.droppedLines).toBe(0);
      budget.close();
      await redis.del(key);
    });

    it('counts the lines of a write Redis refused as dropped', async () => {
      const key = `ev:budget-fail-${Date.now()}`;
      await redis.set(key, 'not a stream');
      const budget = new StreamBudget({ redis, key, highWater: 1000, log });
      const events = publisher(key, { budget });
      for (let i = 0; i < 10; i++) events.line('stdout', String(i));
      await events.drained();
      expect(events.droppedLines).toBe(10);
      budget.close();
      await redis.del(key);
    });
  });
});
