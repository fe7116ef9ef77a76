import { createKeySpace, type JobState, JobStore, parseJobSpec } from '@sandstream/bus';
import { startHealthServer } from '@sandstream/service-kit';
import { silentLogger } from '@sandstream/telemetry';
import {
  addOutputLines,
  connectTestRedis,
  deleteNamespaceKeys,
  NatsServer,
  uniqueNamespace,
} from '@sandstream/test-support';
import type { Redis } from 'ioredis';
import { connect, type Msg } from 'nats';
import { afterEach, describe, expect, it } from 'vitest';
import { type RelayHost, startLifecycleRelay } from './lifecycle-relay-service.js';
import { LogArchiveEnvSchema } from './log-archive-config.js';

// Issue 27: NATS down longer than nats.js' default give-up (10 attempts, 2 s apart) closed the
// relay's and the archive's connection for good. With a private nats-server (JetStream) killed
// and brought back on the same port and store, both must go on by themselves. The reconnect wait
// is lowered to 250 ms so the default give-up (10 attempts) passes within ~3 s of the outage;
// the outage below lasts well past it.
const logger = silentLogger('nats-outage-test');
const redis = connectTestRedis();
const RECONNECT_WAIT_MS = 250;
/** Past what 10 default attempts at RECONNECT_WAIT_MS (+ jitter) take to give up. */
const OUTAGE_MS = 8_000;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function setup(nats: NatsServer) {
  const ns = uniqueNamespace('t-natsout');
  const keys = createKeySpace(ns);
  const store = new JobStore({ redis, keys });
  const conns: Redis[] = [connectTestRedis(), connectTestRedis(), connectTestRedis()];
  const shutdown: (() => Promise<void>)[] = [];
  const jobIds: string[] = [];
  // An observer that itself survives the outage (it is not under test); NATS may be down yet.
  const relayed: Msg[] = [];
  const observing = connect({
    servers: nats.url,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
  }).then((observer) => {
    observer.subscribe(`sandstream.${ns}.lifecycle.>`, { callback: (_err, msg) => relayed.push(msg) });
    return observer;
  });
  cleanups.push(async () => {
    for (const run of shutdown.reverse()) await run();
    // Not awaited: when a test failed with NATS down, the observer is still connecting.
    void observing.then((observer) => observer.close());
    for (const c of conns) c.disconnect();
    for (const id of jobIds) await store.delete(id, 'acme');
    await deleteNamespaceKeys(redis, ns);
  });

  const host: RelayHost = await startLifecycleRelay({
    natsUrl: nats.url,
    subjectPrefix: 'sandstream',
    keys,
    redis: conns[0] as Redis,
    logger,
    onShutdown: (_name, run) => shutdown.push(run),
    link: { reconnectWaitMs: RECONNECT_WAIT_MS, rebuildWaitMs: 200, maxRebuildWaitMs: 1000 },
    logArchive: {
      env: LogArchiveEnvSchema.parse({ LOG_ARCHIVE_KEEP_ENTRIES: '0' }),
      lifecycleRedis: conns[1] as Redis,
      redis: conns[2] as Redis,
    },
  });

  /** A job that runs, prints `count` lines and succeeds; resolves once its archive is done. */
  const runJob = async (name: string, count: number) => {
    const id = `${ns}-${name}`;
    jobIds.push(id);
    await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    const path: JobState[] = ['queued', 'scheduled', 'starting', 'running'];
    for (let i = 1; i < path.length; i++)
      await store.transition(id, [path[i - 1] as JobState], path[i] as JobState);
    await addOutputLines(redis, keys.sandbox(id).events, 1, count);
    await store.transition(id, ['running'], 'succeeded');
    return id;
  };
  const archiveDone = (id: string) =>
    expect.poll(() => redis.get(keys.jobLogArchive(id)), { timeout: 60_000, interval: 200 }).toBe('done');
  const relayedTo = (id: string, state: string) =>
    expect
      .poll(
        () =>
          relayed.some((m) => m.subject.endsWith(`.${state}`) && m.headers?.get('Sandstream-Job-Id') === id),
        { timeout: 60_000, interval: 200 },
      )
      .toBe(true);
  /** Discovery's group exists: jobs created from now on are seen. */
  const discovering = () =>
    expect
      .poll(
        async () => {
          if ((await redis.exists(keys.lifecycleStream)) === 0) return false;
          const groups = (await redis.xinfo('GROUPS', keys.lifecycleStream)) as unknown[][];
          return (
            groups.some((g) => g.includes('log-archive')) && groups.some((g) => g.includes('nats-relay'))
          );
        },
        { timeout: 30_000 },
      )
      .toBe(true);
  return { host, runJob, archiveDone, relayedTo, discovering, keys };
}

describe('lifecycle relay and log archive through NATS outages', () => {
  it('go on after NATS was down longer than the client default give-up; /healthz stays ok, /readyz follows', async () => {
    const nats = await NatsServer.start({ jetstream: true });
    cleanups.push(() => nats.stop());
    const t = await setup(nats);
    const health = await startHealthServer({
      port: 0,
      checks: { nats: t.host.ready },
      liveness: { nats: t.host.live },
    });
    cleanups.push(() => health.close());
    const get = async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${health.port}${path}`);
      return { status: res.status, body: (await res.json()) as { checks?: Record<string, string> } };
    };

    await t.discovering();
    const before = await t.runJob('before', 500);
    await t.archiveDone(before);
    await t.relayedTo(before, 'succeeded');
    expect((await get('/readyz')).status).toBe(200);

    await nats.halt();
    await expect.poll(() => t.host.ready(), { timeout: 30_000 }).toBe(false);
    // Work arrives while NATS is down: the archive must hold it once NATS is back.
    const during = await t.runJob('during', 3000);
    await new Promise((r) => setTimeout(r, OUTAGE_MS)); // the outage itself: nothing to await
    expect((await get('/readyz')).body.checks?.nats).toBe('failing');
    // Down, not wedged: the link still reconnects, so liveness holds (a restart would not help).
    expect((await get('/healthz')).status).toBe(200);
    await nats.resume();

    await t.archiveDone(during);
    await t.relayedTo(during, 'succeeded');
    const after = await t.runJob('after', 200);
    await t.archiveDone(after);
    await t.relayedTo(after, 'succeeded');
    await expect.poll(() => t.host.ready(), { timeout: 30_000 }).toBe(true);
    expect(t.host.archiver?.stats.gaps).toBe(0);
    expect((await get('/readyz')).status).toBe(200);
  }, 180_000);

  it('start with NATS down, then NATS comes up: both begin', async () => {
    const nats = await NatsServer.start({ jetstream: true });
    cleanups.push(() => nats.stop());
    await nats.halt();
    const t = await setup(nats);
    expect(await t.host.ready()).toBe(false);
    expect(await t.host.live()).toBe(true);
    await t.discovering();
    const early = await t.runJob('early', 300);
    await nats.resume();
    await t.archiveDone(early);
    // The observer may connect after the relay published: the relay's own count of what the
    // server acknowledged (queued, scheduled, starting, running, succeeded).
    await expect.poll(() => t.host.relay.published, { timeout: 60_000 }).toBeGreaterThanOrEqual(5);
  }, 120_000);

  it('a connection closed for good is replaced by a new one', async () => {
    const nats = await NatsServer.start({ jetstream: true });
    cleanups.push(() => nats.stop());
    const t = await setup(nats);
    await t.discovering();
    const first = await t.host.link.connection(new AbortController().signal);
    await first.close();
    await expect.poll(() => t.host.link.built, { timeout: 30_000 }).toBe(2);
    const id = await t.runJob('after-close', 300);
    await t.archiveDone(id);
    await t.relayedTo(id, 'succeeded');
    expect(await t.host.live()).toBe(true);
  }, 120_000);
});
