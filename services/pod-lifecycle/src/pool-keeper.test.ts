import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentAnnouncements, createKeySpace, type PoolMember, WarmPoolStore } from '@sandstream/bus';
import { InProcessBackend, TemplateRegistry } from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { PoolKeeper } from './pool-keeper.js';
import { PoolMembers } from './pool-members.js';
import { poolSpecHash } from './pool-spec.js';
import { WarmStart } from './warm-start.js';

const url = testRedisUrl();
const redis = new Redis(url, { maxRetriesPerRequest: null });
const root = mkdtempSync(join(tmpdir(), 'sandstream-pool-keeper-'));
const logger = silentLogger('pool-keeper-test');
const open: { close(): Promise<void> | void }[] = [];

afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});
afterAll(() => {
  redis.disconnect();
  rmSync(root, { recursive: true, force: true });
});

async function setup(
  yaml: string,
  options: {
    capacity?: number;
    refillConcurrency?: number;
    bindTimeoutMs?: number;
    heartbeatGraceMs?: number;
  } = {},
) {
  const ns = uniqueNamespace('pk');
  const keys = createKeySpace(ns);
  const file = join(root, `${ns}.yaml`);
  writeFileSync(file, yaml);
  const registry = await TemplateRegistry.open({ path: file, watch: false });
  const subscriber = new Redis(url, { maxRetriesPerRequest: null });
  const announcements = new AgentAnnouncements(subscriber);
  await announcements.start();
  const backend = new InProcessBackend({ redis, root, registryKey: `${ns}:inprocess` });
  const store = new WarmPoolStore(redis, keys);
  const members = new PoolMembers({
    store,
    redis,
    keys,
    backend,
    acl: null,
    announcements,
    agentRedisUrl: url,
    installation: 'pool-keeper-test',
    owner: 'test',
    logger,
  });
  const keeper = new PoolKeeper({
    source: registry,
    store,
    members,
    redis,
    keys,
    logger,
    capacity: options.capacity,
    refillConcurrency: options.refillConcurrency ?? 4,
    intervalMs: 100,
    heartbeatGraceMs: options.heartbeatGraceMs ?? 0,
  });
  const warm = new WarmStart({
    source: registry,
    store,
    members,
    redis,
    keys,
    acl: null,
    announcements,
    logger,
    bindTimeoutMs: options.bindTimeoutMs ?? 10_000,
  });
  open.push({
    close: async () => {
      await keeper.stop();
      for (const m of await store.all()) await members.destroy(m);
      for (const s of await backend.list()) await backend.destroy(s, { graceMs: 0 });
      await announcements.close();
      subscriber.disconnect();
      await deleteNamespaceKeys(redis, ns);
    },
  });
  const of = async (pool: string, state?: PoolMember['state']) =>
    (await store.all()).filter((m) => m.pool === pool && (state === undefined || m.state === state));
  return { keys, store, keeper, registry, of, warm, backend };
}

const POOL = (name: string, min: number, max: number) =>
  `  ${name}:\n    image: local\n    pool: { min: ${min}, max: ${max} }\n`;

describe('PoolKeeper', () => {
  it('retires a member a dead replica left starting once its deadline passed, and replaces it', async () => {
    const { store, keeper, registry, of } = await setup(`templates:\n${POOL('node', 1, 1)}`);
    const pool = registry.pools()[0] as NonNullable<ReturnType<typeof registry.pools>[0]>;
    const orphan: PoolMember = {
      id: 'left-by-a-dead-replica',
      pool: 'node',
      specHash: poolSpecHash(pool),
      tenants: null,
      state: 'starting',
      createdAt: Date.now(),
      readyBy: Date.now() + 300,
      owner: 'dead',
    };
    expect(await store.reserve(orphan, { max: 1, capacity: 1 })).toBe('reserved');
    await keeper.tend();
    // Within its deadline it holds the pool's only place: nothing is added on top.
    expect((await of('node')).map((m) => m.id)).toEqual([orphan.id]);
    // Time itself is what is tested: the member's deadline (readyBy) must pass.
    await new Promise((r) => setTimeout(r, 400));
    keeper.start();
    await expect.poll(async () => (await of('node', 'ready')).length, { timeout: 20_000 }).toBe(1);
    expect(await store.get(orphan.id)).toBeNull();
  }, 30_000);

  it('retires a ready member whose agent died, and refills', async () => {
    const { keys, keeper, of } = await setup(`templates:\n${POOL('node', 1, 2)}`);
    keeper.start();
    await expect.poll(async () => (await of('node', 'ready')).length, { timeout: 20_000 }).toBe(1);
    const [dead] = await of('node', 'ready');
    process.kill(Number(dead?.ref?.id), 'SIGKILL');
    await redis.del(keys.sandbox(dead?.id as string).heartbeat);
    await expect
      .poll(async () => (await of('node', 'ready')).map((m) => m.id), { timeout: 20_000 })
      .toEqual([expect.not.stringMatching(dead?.id as string)]);
  }, 30_000);

  it('keeps a ready member whose heartbeat a Redis restart lost, and retires one whose heartbeat stays missing past the grace', async () => {
    const grace = 4000;
    const { keys, keeper, of } = await setup(`templates:\n${POOL('node', 2, 2)}`, {
      heartbeatGraceMs: grace,
    });
    await keeper.tend();
    await expect.poll(async () => (await of('node', 'ready')).length, { timeout: 20_000 }).toBe(2);
    const [alive, dead] = (await of('node', 'ready')) as [PoolMember, PoolMember];
    // What a restart leaves: both heartbeats gone; one agent is alive (it sets its heartbeat
    // again within its period), the other died meanwhile.
    process.kill(Number(dead.ref?.id), 'SIGKILL');
    await redis.del(keys.sandbox(alive.id).heartbeat, keys.sandbox(dead.id).heartbeat);
    const firstMiss = Date.now();
    await keeper.tend();
    expect((await of('node', 'ready')).map((m) => m.id).sort()).toEqual([alive.id, dead.id].sort());
    await expect.poll(() => redis.exists(keys.sandbox(alive.id).heartbeat), { timeout: 20_000 }).toBe(1);
    // Tended until the dead one goes: never before the grace, and the live one stays.
    await expect
      .poll(
        async () => {
          await keeper.tend();
          return (await of('node')).some((m) => m.id === dead.id);
        },
        { timeout: 20_000, interval: 200 },
      )
      .toBe(false);
    expect(Date.now() - firstMiss).toBeGreaterThanOrEqual(grace);
    expect(await of('node', 'ready')).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: alive.id })]),
    );
  }, 40_000);

  it('stops at the global capacity, by default the sum of the mins', async () => {
    const yaml = `templates:\n${POOL('a', 2, 5)}${POOL('b', 1, 5)}`;
    const first = await setup(yaml, { capacity: 2 });
    await first.keeper.tend();
    expect((await first.of('a')).length + (await first.of('b')).length).toBe(2);
    const second = await setup(yaml);
    expect(second.keeper.capacity(second.registry.pools())).toBe(3);
    await second.keeper.tend();
    expect((await second.of('a')).length).toBe(2);
    expect((await second.of('b')).length).toBe(1);
  }, 30_000);

  it('reads every member once per pass, however many pools there are', async () => {
    const yaml = `templates:\n${POOL('a', 1, 1)}${POOL('b', 1, 1)}${POOL('c', 1, 1)}${POOL('d', 1, 1)}`;
    const { keys, keeper, of } = await setup(yaml);
    keeper.start();
    await expect
      .poll(async () => (await Promise.all(['a', 'b', 'c', 'd'].map((p) => of(p, 'ready')))).flat().length, {
        timeout: 30_000,
      })
      .toBe(4);
    await keeper.stop();
    // The pools' locks of the last pass may still hold: wait them out (before the record starts,
    // which would count these reads), then one pass.
    const locks = ['a', 'b', 'c', 'd'].map((p) => keys.lock(`pool:${p}`));
    await vi.waitUntil(async () => (await redis.exists(...locks)) === 0, { timeout: 20_000, interval: 10 });
    // Redis' own record of what one pass sent, this namespace's commands only (the Redis is shared).
    const monitor = await redis.duplicate().monitor();
    const sent: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args.some((a) => a.includes(keys.namespace))) sent.push(args);
    });
    try {
      await keeper.tend();
      // MONITOR delivers in order: everything of the pass came before this PING.
      const end = `${keys.namespace}-pass-end`;
      await redis.ping(end);
      await vi.waitUntil(() => sent.some((args) => args.includes(end)), { timeout: 20_000, interval: 10 });
    } finally {
      monitor.disconnect();
    }
    const named = (command: string) => sent.filter((args) => args[0]?.toLowerCase() === command);
    expect(named('set').filter((args) => args[1]?.includes(':pool:')).length).toBe(4);
    expect(named('hgetall').length).toBe(1);
    expect(named('exists').length).toBe(4);
  }, 60_000);

  it('starts no more members at once than its refill concurrency', async () => {
    const { keeper, of } = await setup(`templates:\n${POOL('node', 4, 4)}`, { refillConcurrency: 1 });
    await keeper.tend();
    await keeper.tend();
    expect((await of('node')).length).toBe(1);
  }, 30_000);
});

describe('WarmStart', () => {
  it('binds a member to the claiming job, and destroys it when that start is redelivered', async () => {
    const { keys, keeper, registry, of, warm, backend } = await setup(`templates:\n${POOL('node', 1, 1)}`);
    keeper.start();
    await expect.poll(async () => (await of('node', 'ready')).length, { timeout: 20_000 }).toBe(1);
    const [member] = await of('node', 'ready');
    const spec = registry.resolve({ template: 'node' });
    const jobId = `${keys.namespace}-job`;
    const request = { jobId, tenant: 't', spec, live: false, notifyStream: keys.completionStream(0) };
    const hit = await warm.tryClaim(request);
    expect(hit).toMatchObject({ kind: 'hit', member: { id: member?.id } });
    expect(hit.kind === 'hit' && (await hit.bound)).toBe(true);
    // Its agent now runs as the job.
    expect(await redis.exists(keys.sandbox(jobId).heartbeat)).toBe(1);
    // The same start again (a crash after the claim): the member is destroyed before a cold start.
    expect(await warm.tryClaim(request)).toEqual({ kind: 'miss', reason: 'claimed-before' });
    expect((await backend.list()).map((s) => s.jobId)).not.toContain(member?.id);
    await redis.del(keys.sandbox(jobId).heartbeat);
  }, 30_000);

  it('reports a claimed member that never comes up as the job, and destroys it', async () => {
    const { keys, keeper, registry, of, warm, store } = await setup(`templates:\n${POOL('node', 1, 1)}`, {
      bindTimeoutMs: 1500,
    });
    keeper.start();
    await expect.poll(async () => (await of('node', 'ready')).length, { timeout: 20_000 }).toBe(1);
    await keeper.stop();
    const [member] = await of('node', 'ready');
    // Its agent dies just after its last heartbeat: the claim still finds the heartbeat there.
    process.kill(Number(member?.ref?.id), 'SIGKILL');
    await redis.set(keys.sandbox(member?.id as string).heartbeat, '1', 'PX', 60_000);
    const spec = registry.resolve({ template: 'node' });
    const jobId = `${keys.namespace}-dead`;
    const hit = await warm.tryClaim({ jobId, tenant: 't', spec, live: false, notifyStream: 'n' });
    expect(hit.kind).toBe('hit');
    expect(hit.kind === 'hit' && (await hit.bound)).toBe(false);
    expect(await store.get(member?.id as string)).toBeNull();
  }, 30_000);

  it('leaves requests a member cannot serve to a cold start, saying why', async () => {
    const { keys, registry, warm } = await setup(`templates:\n${POOL('node', 1, 1)}`);
    const spec = registry.resolve({ template: 'node', spec: { resources: { limits: { memory: '2Gi' } } } });
    const request = { jobId: `${keys.namespace}-j`, tenant: 't', live: false, notifyStream: 'n' };
    expect(await warm.tryClaim({ ...request, spec })).toEqual({
      kind: 'miss',
      reason: 'spec-differs: resources',
    });
    expect(await warm.tryClaim({ ...request, spec: registry.resolve({ template: 'node' }) })).toEqual({
      kind: 'miss',
      reason: 'empty',
    });
  });
});
