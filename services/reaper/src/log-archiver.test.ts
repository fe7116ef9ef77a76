import {
  type ArchiveMessage,
  ArchiveMessageSchema,
  createKeySpace,
  type JobState,
  JobStore,
  logArchiveNames,
  parseJobSpec,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import {
  addOutputLines,
  connectTestRedis,
  deleteNamespaceKeys,
  uniqueNamespace,
} from '@sandstream/test-support';
import { test } from '@sandstream/test-support/vitest';
import type { Redis } from 'ioredis';
import { connect, type NatsConnection, type StoredMsg } from 'nats';
import { afterAll, describe, expect } from 'vitest';
import { LogArchiver, type LogArchiverOptions } from './log-archiver.js';
import { fixedNats } from './nats-link.js';

// Real NATS (a private nats-server per test, JetStream on) and the shared Redis under a random
// namespace: the archiver's whole path, with nothing mocked.
const logger = silentLogger('log-archive-test');
const redis = connectTestRedis();
const cleanups: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  redis.disconnect();
});

interface ArchiverHandle {
  archiver: LogArchiver;
  nats: NatsConnection;
  conns: Redis[];
}

function harness(natsUrl: string) {
  const ns = uniqueNamespace('t-arch');
  const keys = createKeySpace(ns);
  const store = new JobStore({ redis, keys });
  const names = logArchiveNames({ namespace: ns });
  const handles: ArchiverHandle[] = [];
  const jobIds: string[] = [];
  cleanups.push(async () => {
    for (const h of handles) {
      await h.archiver.stop();
      await h.nats.close();
      for (const c of h.conns) c.disconnect();
    }
    for (const id of jobIds) await store.delete(id, 'acme');
    await deleteNamespaceKeys(redis, ns);
  });

  const start = async (consumer: string, extra: Partial<LogArchiverOptions> = {}) => {
    const nats = await connect({ servers: natsUrl });
    const conns = [connectTestRedis(), connectTestRedis()];
    const archiver = new LogArchiver({
      redis: conns[0] as Redis,
      lifecycleRedis: conns[1] as Redis,
      keys,
      nats: fixedNats(nats),
      logger,
      consumer,
      keepEntries: 100,
      batchEntries: 50,
      readCount: 200,
      idlePollMs: 30,
      tickMs: 100,
      leaseMs: 1000,
      completeGraceMs: 0,
      ...extra,
    });
    archiver.start();
    const handle = { archiver, nats, conns };
    handles.push(handle);
    // Discovery's group must exist before the jobs it should see are created.
    await expect
      .poll(async () => {
        if ((await redis.exists(keys.lifecycleStream)) === 0) return false;
        const groups = (await redis.xinfo('GROUPS', keys.lifecycleStream)) as unknown[][];
        return groups.some((g) => g.includes('log-archive'));
      })
      .toBe(true);
    return handle;
  };

  /** A crash, as far as the archiver can tell: its connections are gone, it never stops cleanly. */
  const crash = async (h: ArchiverHandle) => {
    for (const c of h.conns) c.disconnect();
    await h.nats.close();
  };

  const job = async (name: string) => {
    const id = `${ns}-${name}`;
    jobIds.push(id);
    await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    await expect.poll(() => redis.zscore(keys.logArchiveActive, id)).not.toBeNull();
    return id;
  };

  const finish = async (id: string) => {
    const path: JobState[] = ['queued', 'scheduled', 'starting', 'running', 'succeeded'];
    for (let i = 1; i < path.length; i++)
      await store.transition(id, [path[i - 1] as JobState], path[i] as JobState);
  };

  /** Agent-like output lines `from..to` of step s1, as the agent XADDs them. */
  const lines = (id: string, from: number, to: number) =>
    addOutputLines(redis, keys.sandbox(id).events, from, to);

  /** Every message of the job's subject, in order. */
  const archived = async (id: string) => {
    const reader = await connect({ servers: natsUrl });
    try {
      const jsm = await reader.jetstreamManager();
      const info = await jsm.streams.info(names.stream);
      const messages: { msg: StoredMsg; body: ArchiveMessage }[] = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
        const msg = await jsm.streams.getMessage(names.stream, { seq });
        if (msg.subject !== names.subject(id)) continue;
        messages.push({ msg, body: ArchiveMessageSchema.parse(msg.json()) });
      }
      return messages;
    } finally {
      await reader.close();
    }
  };

  /** The `seq` of every archived output line, in archive order. */
  const archivedLines = async (id: string) =>
    (await archived(id)).flatMap(({ body }) =>
      body.entries
        .filter(([, fields]) => fields[0] === 'event')
        .map(([, fields]) => (JSON.parse(fields[1] as string) as { seq: number }).seq),
    );

  const isComplete = async (id: string) => {
    const messages = await archived(id);
    return messages.at(-1)?.body.complete === true;
  };

  return {
    ns,
    keys,
    store,
    names,
    start,
    crash,
    job,
    finish,
    lines,
    archived,
    archivedLines,
    isComplete,
    forget: (id: string) => jobIds.push(id),
  };
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('log archiver (JetStream)', () => {
  test('archives a job that was already running when the archiver started (found by the sweep)', async ({
    natsServer,
  }) => {
    const h = harness(natsServer.url);
    // Created and running before any archiver: its lifecycle entries precede discovery's group.
    const id = `${h.ns}-before`;
    h.forget(id);
    await h.store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    const path: JobState[] = ['queued', 'scheduled', 'starting', 'running'];
    for (let i = 1; i < path.length; i++)
      await h.store.transition(id, [path[i - 1] as JobState], path[i] as JobState);
    await h.lines(id, 1, 50);
    await h.start('a');
    await expect.poll(() => h.archivedLines(id), { timeout: 20_000 }).toEqual(range(1, 50));
    expect(await redis.get(h.keys.jobLogArchive(id))).toBe('pending');
  });

  test('a job id used again after the first job was reaped gets an archive of its own', async ({
    natsServer,
  }) => {
    const h = harness(natsServer.url);
    await h.start('a');
    const id = await h.job('reused');
    await h.lines(id, 1, 100);
    await h.finish(id);
    await expect.poll(() => h.isComplete(id), { timeout: 20_000 }).toBe(true);
    // What the reaper does after retention: the record and every key of the job go.
    await h.store.delete(id);
    await redis.unlink(h.keys.sandbox(id).events, h.keys.jobLogArchive(id));
    await redis.zrem(h.keys.logArchiveActive, id);
    // Later (at least a millisecond: createdAt tells the two apart), the same id again.
    await new Promise((resolve) => setTimeout(resolve, 5));
    await h.job('reused');
    await h.lines(id, 1, 40);
    // The earlier job's messages (its complete marker among them) are not taken for this one's.
    await expect.poll(() => h.archivedLines(id), { timeout: 20_000 }).toEqual(range(1, 40));
    expect(await h.isComplete(id)).toBe(false);
    expect(await redis.get(h.keys.jobLogArchive(id))).toBe('pending');
    await h.finish(id);
    await expect.poll(() => h.isComplete(id), { timeout: 10_000 }).toBe(true);
    expect(await h.archivedLines(id)).toEqual(range(1, 40));
  });

  test('archives every entry in order, trims only archived ones, then completes the job', async ({
    natsServer,
  }) => {
    const h = harness(natsServer.url);
    await h.start('a');
    const id = await h.job('in-order');
    expect(await redis.get(h.keys.jobLogArchive(id))).toBe('pending');
    for (let i = 0; i < 10; i++) await h.lines(id, i * 300 + 1, (i + 1) * 300);
    await expect.poll(() => h.archivedLines(id), { timeout: 20_000 }).toHaveLength(3000);
    expect(await h.archivedLines(id)).toEqual(range(1, 3000));

    // The stream keeps the last archived entries for followers, not all of them.
    const length = await redis.xlen(h.keys.sandbox(id).events);
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThan(600);

    // The archive holds the stream's entries verbatim: ids, fields, the job's own lifecycle entries.
    const messages = await h.archived(id);
    const first = messages[0]!;
    expect(first.msg.header.get('Sandstream-Job-Id')).toBe(id);
    const created = (await h.store.get(id))?.createdAt;
    expect(first.msg.header.get('Sandstream-Job-Created')).toBe(String(created));
    expect(first.msg.header.get('Nats-Msg-Id')).toBe(`${h.ns}:${id}:${created}:${first.body.entries[0]![0]}`);
    expect(first.msg.header.get('Sandstream-Last-Entry')).toBe(first.body.entries.at(-1)![0]);
    expect(first.body.entries[0]![1][0]).toBe('job');
    const [tail] = await redis.xrevrange(h.keys.sandbox(id).events, '+', '-', 'COUNT', 1);
    expect(messages.at(-1)!.body.entries.at(-1)).toEqual(tail);
    for (const { body } of messages) expect(body.entries.length).toBeLessThanOrEqual(50);

    expect(await h.isComplete(id)).toBe(false);
    await h.finish(id);
    await expect.poll(() => h.isComplete(id), { timeout: 10_000 }).toBe(true);
    const done = (await h.archived(id)).at(-1)!;
    expect(done.msg.header.get('Sandstream-Complete')).toBe('1');
    expect(done.body).toEqual({ entries: [], complete: true });
    // The terminal lifecycle entry was archived before the final message.
    const jobEntries = (await h.archived(id)).flatMap(({ body }) =>
      body.entries.filter(([, f]) => f[0] === 'job').map(([, f]) => (JSON.parse(f[1]!) as { to: string }).to),
    );
    expect(jobEntries.at(-1)).toBe('succeeded');
    expect(await redis.get(h.keys.jobLogArchive(id))).toBe('done');
    expect(await redis.zscore(h.keys.logArchiveActive, id)).toBeNull();
  }, 60_000);

  test('never trims what JetStream has not acknowledged', async ({ natsServer }) => {
    const h = harness(natsServer.url);
    await h.start('a');
    const id = await h.job('nats-down');
    await h.lines(id, 1, 300);
    await expect.poll(() => h.archivedLines(id), { timeout: 10_000 }).toHaveLength(300);
    await natsServer.stop();
    await h.lines(id, 301, 2300);
    // An absence over a while is what is tested: a trim of unacknowledged lines would come now.
    await new Promise((r) => setTimeout(r, 1500));
    // Every line JetStream never got is still in Redis.
    const left = await redis.xrange(h.keys.sandbox(id).events, '-', '+');
    const seqs = left
      .filter(([, f]) => f[0] === 'event')
      .map(([, f]) => (JSON.parse(f[1]!) as { seq: number }).seq);
    expect(seqs.slice(-2000)).toEqual(range(301, 2300));
  }, 60_000);

  test('an archiver killed mid-job: its successor goes on with no line twice and none lost', async ({
    natsServer,
  }) => {
    const h = harness(natsServer.url);
    const first = await h.start('first');
    const id = await h.job('crash');
    let next = 1;
    const writer = (async () => {
      while (next <= 6000) {
        await h.lines(id, next, next + 99);
        next += 100;
        // A writer paced on purpose: lines keep coming while the archiver crashes.
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await expect
      .poll(async () => (await h.archivedLines(id)).length, { timeout: 20_000 })
      .toBeGreaterThan(1000);
    await h.crash(first);
    const second = await h.start('second');
    await writer;
    await h.finish(id);
    await expect.poll(() => h.isComplete(id), { timeout: 30_000 }).toBe(true);
    expect(await h.archivedLines(id)).toEqual(range(1, 6000));
    expect(second.archiver.stats.entries).toBeGreaterThan(0);
  }, 90_000);

  test('two archivers working one job at once (a lapsed lease): still exactly once, in order', async ({
    natsServer,
  }) => {
    const h = harness(natsServer.url);
    // No lease renewal during the test, so neither notices the other: only JetStream's
    // expected-last-subject-sequence check keeps them from writing a line twice.
    const slow = { tickMs: 120_000, leaseMs: 120_000 };
    // Listed as discovery would list it, so that each archiver's first (and only) tick claims it.
    const id = `${h.ns}-both`;
    await h.store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    await redis.zadd(h.keys.logArchiveActive, Date.now(), id);
    h.forget(id);
    const a = await h.start('a', slow);
    await expect.poll(() => a.archiver.activeJobs).toBe(1);
    // The second takes the job as if a's lease had expired.
    await redis.del(h.keys.lock(`log-archive:${id}`));
    const b = await h.start('b', slow);
    await expect.poll(() => b.archiver.activeJobs).toBe(1);
    for (let i = 0; i < 40; i++) {
      await h.lines(id, i * 100 + 1, (i + 1) * 100);
      // Paced on purpose: both archivers read while the lines arrive.
      await new Promise((r) => setTimeout(r, 10));
    }
    await h.finish(id);
    await expect.poll(() => h.isComplete(id), { timeout: 30_000 }).toBe(true);
    expect(await h.archivedLines(id)).toEqual(range(1, 4000));
    expect((await h.archived(id)).filter(({ body }) => body.complete)).toHaveLength(1);
    expect(a.archiver.stats.conflicts + b.archiver.stats.conflicts).toBeGreaterThan(0);
  }, 90_000);

  test('entries trimmed from Redis before they were archived become a visible gap marker', async ({
    natsServer,
  }) => {
    const h = harness(natsServer.url);
    const first = await h.start('first');
    const id = await h.job('gap');
    await h.lines(id, 1, 10);
    await expect.poll(() => h.archivedLines(id), { timeout: 10_000 }).toHaveLength(10);
    await first.archiver.stop();
    // The archiver was away; the agent's cap (or anyone) trimmed the stream to its last 100.
    await h.lines(id, 11, 1010);
    await redis.xtrim(h.keys.sandbox(id).events, 'MAXLEN', 100);
    await h.start('second');
    await expect.poll(async () => (await h.archivedLines(id)).length, { timeout: 10_000 }).toBe(110);
    const messages = await h.archived(id);
    const gaps = messages.filter(({ body }) => body.gap);
    expect(gaps).toHaveLength(1);
    const gap = gaps[0]!;
    expect(gap.body.gap?.lost).toBe(900);
    expect(gap.msg.header.get('Sandstream-Gap')).toBe('900');
    // In place: after line 10, before line 911.
    const lines = await h.archivedLines(id);
    expect(lines).toEqual([...range(1, 10), ...range(911, 1010)]);
    const order = messages.map(({ body }) => (body.gap ? 'gap' : 'entries'));
    expect(order.indexOf('gap')).toBeGreaterThan(0);
    expect(messages.slice(order.indexOf('gap') + 1).every(({ body }) => !body.gap)).toBe(true);
  }, 60_000);

  test('an entry deleted from the middle (XDEL) is recorded once, not on every poll', async ({
    natsServer,
  }) => {
    const h = harness(natsServer.url);
    const first = await h.start('first');
    const id = await h.job('xdel');
    await expect.poll(() => h.archived(id), { timeout: 10_000 }).toHaveLength(1);
    await first.archiver.stop();
    await h.lines(id, 1, 20);
    const entries = await redis.xrange(h.keys.sandbox(id).events, '-', '+');
    const victim = entries.find(([, f]) => f[1]?.includes('"seq":5,'))!;
    await redis.xdel(h.keys.sandbox(id).events, victim[0]);
    await h.start('second');
    await expect.poll(async () => (await h.archivedLines(id)).length, { timeout: 10_000 }).toBe(19);
    // An absence over a while is what is tested: no second gap message follows.
    await new Promise((r) => setTimeout(r, 500));
    const gaps = (await h.archived(id)).filter(({ body }) => body.gap);
    expect(gaps).toHaveLength(1);
    expect(gaps[0]!.msg.header.get('Sandstream-Gap')).toBe('unknown');
  }, 60_000);
});
