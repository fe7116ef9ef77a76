import { connectTestRedis, deleteNamespaceKeys, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { parseJobSpec } from './job-spec.js';
import { JobStore } from './job-store.js';
import { createKeySpace } from './key-space.js';
import { parseLiveSandboxSpec } from './live-sandbox-spec.js';
import {
  VOLUME_HOLD_RECORD_GRACE_MS,
  VolumeInUseError,
  VolumeNotFoundError,
  VolumeQuotaError,
  VolumeStore,
} from './volume-store.js';

const redis = connectTestRedis();
const namespaces: string[] = [];

function fresh() {
  const ns = `t-${uniqueSuffix()}`;
  namespaces.push(ns);
  const keys = createKeySpace(ns);
  const jobs = new JobStore({ redis, keys });
  // Job ids carry the namespace: job:{id} keys are not namespaced, and the clean-up finds them so.
  const id = (name: string) => `${ns}-${name}`;
  return { keys, jobs, id, store: new VolumeStore(redis, keys, jobs) };
}

afterAll(async () => {
  for (const ns of namespaces) await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

const rw = (name: string) => ({ name, mountPath: `/mnt/${name}`, readOnly: false });
const ro = (name: string) => ({ name, mountPath: `/mnt/${name}`, readOnly: true });

describe('VolumeStore', () => {
  it('creates idempotently by name, per tenant: another tenant does not see it', async () => {
    const { store, id } = fresh();
    const first = await store.create('a', { name: 'data', sizeLimitBytes: 1024 });
    expect(first.created).toBe(true);
    const again = await store.create('a', { name: 'data' });
    expect(again).toEqual({ volume: first.volume, created: false });
    expect((await store.list('a')).map((v) => v.name)).toEqual(['data']);
    expect(await store.list('b')).toEqual([]);
    expect(await store.get('b', 'data')).toBeNull();
    await expect(store.delete('b', 'data')).rejects.toBeInstanceOf(VolumeNotFoundError);
    await expect(store.acquire(id('j-b'), 'b', [rw('data')])).rejects.toBeInstanceOf(VolumeNotFoundError);
  });

  it('refuses a create over the count or the byte quota, naming the limit', async () => {
    const { store } = fresh();
    await store.setQuota('q', { maxCount: 2, maxBytes: 3000 });
    await store.create('q', { name: 'one', sizeLimitBytes: 1000 });
    const bytes = await store.create('q', { name: 'big', sizeLimitBytes: 2001 }).catch((e: unknown) => e);
    expect(bytes).toBeInstanceOf(VolumeQuotaError);
    expect((bytes as VolumeQuotaError).limit).toBe('maxBytes');
    expect((bytes as Error).message).toContain('maxBytes is 3000, 1000 in use');
    await store.create('q', { name: 'two', sizeLimitBytes: 2000 });
    const count = await store.create('q', { name: 'three', sizeLimitBytes: 1 }).catch((e: unknown) => e);
    expect((count as VolumeQuotaError).limit).toBe('maxCount');
    expect((count as Error).message).toContain('maxCount is 2');
    // Another tenant has the default quota.
    expect((await store.create('other', { name: 'three' })).created).toBe(true);
  });

  it('one writer at a time, named when refused; readers share; release frees it', async () => {
    const { store, jobs, id } = fresh();
    await store.create('t', { name: 'data' });
    // Holders with live records (queued), so none is taken for stale.
    for (const name of ['w1', 'w2', 'r1', 'r2']) {
      await jobs.create(parseLiveSandboxSpec({ id: id(name), tenant: 't', image: 'x' }));
    }
    await store.acquire(id('w1'), 't', [rw('data')]);
    const refused = await store.acquire(id('w2'), 't', [rw('data')]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(VolumeInUseError);
    expect((refused as VolumeInUseError).holder).toBe(id('w1'));
    expect((refused as Error).message).toContain(`sandbox ${id('w1')}`);
    await store.acquire(id('r1'), 't', [ro('data')]);
    await store.acquire(id('r2'), 't', [ro('data')]);
    const [info] = await store.list('t');
    expect(info?.holders.map((h) => [h.sandboxId, h.readOnly]).sort()).toEqual(
      [
        [id('r1'), true],
        [id('r2'), true],
        [id('w1'), false],
      ].sort(),
    );
    // A retried submit of the holder takes its own hold again.
    await store.acquire(id('w1'), 't', [rw('data')]);
    expect(await store.release(id('w1'))).toBe(1);
    await store.acquire(id('w2'), 't', [rw('data')]);
  });

  it('takes all holds or none', async () => {
    const { store, jobs, id } = fresh();
    await store.create('t', { name: 'a' });
    await store.create('t', { name: 'b' });
    await jobs.create(parseLiveSandboxSpec({ id: id('h'), tenant: 't', image: 'x' }));
    await store.acquire(id('h'), 't', [rw('b')]);
    await expect(store.acquire(id('x'), 't', [rw('a'), rw('b')])).rejects.toBeInstanceOf(VolumeInUseError);
    expect((await store.list('t')).find((v) => v.name === 'a')?.holders).toEqual([]);
  });

  it('a second take by the same sandbox adds to what it holds: its release gives back both', async () => {
    const { store, jobs, id } = fresh();
    await store.create('t', { name: 'a' });
    await store.create('t', { name: 'b' });
    await jobs.create(parseLiveSandboxSpec({ id: id('twice'), tenant: 't', image: 'x' }));
    await store.acquire(id('twice'), 't', [rw('a')]);
    await store.acquire(id('twice'), 't', [ro('b')]);
    expect(await store.release(id('twice'))).toBe(2);
    expect((await store.list('t')).map((v) => v.holders)).toEqual([[], []]);
  });

  it('refuses to delete a volume in use, naming the sandbox; deletes it once free and queues its backend object', async () => {
    const { store, jobs, keys, id } = fresh();
    const { volume } = await store.create('t', { name: 'data' });
    await jobs.create(
      parseJobSpec({ id: id('job1'), tenant: 't', image: 'x', steps: [{ command: 'true' }] }),
    );
    await store.acquire(id('job1'), 't', [ro('data')]);
    const refused = await store.delete('t', 'data').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(VolumeInUseError);
    expect((refused as Error).message).toContain(id('job1'));
    await store.release(id('job1'));
    await store.delete('t', 'data');
    expect(await store.get('t', 'data')).toBeNull();
    expect(await store.deletedBackendNames()).toEqual([`sandstream-vol-${volume.uid}`]);
    await store.forgetDeleted(`sandstream-vol-${volume.uid}`);
    expect(await redis.llen(keys.volumes.deleted)).toBe(0);
  });

  it('clears a hold whose sandbox ended, or whose record never came after the grace', async () => {
    const { store, jobs, id, keys } = fresh();
    await store.create('t', { name: 'data' });
    await jobs.create(parseLiveSandboxSpec({ id: id('ended'), tenant: 't', image: 'x' }));
    await store.acquire(id('ended'), 't', [rw('data')]);
    await jobs.transition(id('ended'), ['queued'], 'cancelled', { reason: 'test' });
    // The next writer finds the holder ended: the hold goes, the take succeeds.
    await jobs.create(parseLiveSandboxSpec({ id: id('next'), tenant: 't', image: 'x' }));
    await store.acquire(id('next'), 't', [rw('data')]);
    await store.release(id('next'));

    // The ended holder's own teardown releases its hold between the refusal and the look at its
    // record (a writer closed just before the next mounts): the take is tried again, not refused.
    await jobs.create(parseLiveSandboxSpec({ id: id('closed'), tenant: 't', image: 'x' }));
    await store.acquire(id('closed'), 't', [rw('data')]);
    await jobs.transition(id('closed'), ['queued'], 'cancelled', { reason: 'test' });
    const racing = new VolumeStore(redis, keys, {
      get: async (jobId: string) => {
        const record = await jobs.get(jobId);
        await store.release(jobId);
        return record;
      },
    });
    await jobs.create(parseLiveSandboxSpec({ id: id('after'), tenant: 't', image: 'x' }));
    await racing.acquire(id('after'), 't', [rw('data')]);
    await store.release(id('after'));

    // A submit that died after its hold: no record. Within the grace it holds; past it, the
    // reaper's pass clears it.
    const now = Date.now();
    await store.acquire(id('ghost'), 't', [rw('data')], now);
    expect(await store.clearStaleHolds(now + 1000)).toBe(0);
    await expect(store.acquire(id('later'), 't', [rw('data')])).rejects.toBeInstanceOf(VolumeInUseError);
    expect(await store.clearStaleHolds(now + VOLUME_HOLD_RECORD_GRACE_MS + 1)).toBe(1);
    expect((await store.list('t'))[0]?.holders).toEqual([]);
  });
});

describe('volumes on a spec', () => {
  it('are strict and bounded, with clear errors', () => {
    expect(
      parseLiveSandboxSpec({ image: 'x', volumes: [{ name: 'data', mountPath: '/data' }] }).volumes,
    ).toEqual([{ name: 'data', mountPath: '/data', readOnly: false }]);
    const bad = (volumes: unknown) => {
      try {
        parseLiveSandboxSpec({ image: 'x', volumes });
        return '';
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(bad([{ name: 'data', path: '/data' }])).toMatch(/path.*mountPath/);
    expect(bad([{ name: 'Data', mountPath: '/data' }])).toContain('lower-case');
    expect(bad([{ name: 'data', mountPath: 'data' }])).toContain('mountPath must be an absolute path');
    expect(bad([{ name: 'data', mountPath: '/a/../b' }])).toContain('".."');
    expect(
      bad([
        { name: 'a', mountPath: '/x' },
        { name: 'a', mountPath: '/y' },
      ]),
    ).toContain('volume "a" is mounted twice');
    expect(bad(Array.from({ length: 17 }, (_, i) => ({ name: `v${i}`, mountPath: `/v${i}` })))).toContain(
      'at most 16 volumes',
    );
    expect(() =>
      parseJobSpec({
        image: 'x',
        steps: [{ command: 'true' }],
        volumes: [{ name: 'd', mountPath: '/d', readOnly: true }],
      }),
    ).not.toThrow();
  });
});
