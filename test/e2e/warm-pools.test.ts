import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createKeySpace,
  type JobRecord,
  PoolClaimCounts,
  type PoolMember,
  WarmPoolStore,
} from '@sandstream/bus';
import { DEFAULT_INPROCESS_REGISTRY_KEY } from '@sandstream/sandbox';
import { liveBackends, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destroyPoolMembers } from '../helpers/pool-members.js';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { outputLines } from './job-helpers.js';

// The four services as processes, with a templates file declaring pools, on each backend here.
const scratch = mkdtempSync(join(tmpdir(), 'e2e-pools-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function templates(image: string, greeting: string, warmMin: number): string {
  return `
templates:
  warm:
    image: ${image}
    env: { GREETING: ${greeting} }
    pool: { min: ${warmMin}, max: 3 }
  reserved:
    image: ${image}
    pool: { min: 1, max: 1 }
    tenants: [acme]
  broken:
    image: ${image}
    # An agent that never comes up: members must be replaced, never multiplied.
    command: ["sleep", "600"]
    startDeadlineSeconds: 2
    pool: { min: 2, max: 2 }
`;
}

describe.each(liveBackends())('warm pools ($name backend)', ({ image, env }) => {
  let stack: Stack;
  let pools: WarmPoolStore;
  let brokenSamples: number[] = [];
  let sampler: NodeJS.Timeout | undefined;
  const id = (name: string) => `${stack.namespace}-${name}`;

  const templatesFile = join(scratch, `templates-${image.replaceAll(/[^a-z0-9]/g, '-')}.yaml`);

  beforeAll(async () => {
    writeFileSync(templatesFile, templates(image, 'hello', 2));
    stack = await startStack({
      label: 'pools',
      env: {
        ...env,
        SANDSTREAM_TEMPLATES_FILE: templatesFile,
        POOL_KEEPER_INTERVAL_MS: '200',
        SCHEDULER_GLOBAL_SLOTS: '10',
        SCHEDULER_TENANT_SLOTS: '10',
      },
    });
    pools = new WarmPoolStore(stack.redis, createKeySpace(stack.namespace));
    // How many members the broken pool holds, all along the suite.
    sampler = setInterval(() => {
      pools
        .all()
        .then((all) => brokenSamples.push(all.filter((m) => m.pool === 'broken').length))
        .catch(() => undefined);
    }, 100);
  }, 60_000);

  afterAll(async () => {
    if (sampler) clearInterval(sampler);
    const namespace = stack?.namespace;
    await stack?.stop();
    const redis = new Redis(testRedisUrl());
    if (namespace) await destroyPoolMembers(redis, namespace, env);
    redis.disconnect();
  }, 60_000);

  const ready = async (pool: string, specHash?: string) =>
    (await pools.all()).filter(
      (m: PoolMember) =>
        m.pool === pool && m.state === 'ready' && (specHash === undefined || m.specHash === specHash),
    );

  // What GET /v1/pools reports as hits and misses (counted after the claim, so polled).
  const claims = async (pool: string) =>
    (await new PoolClaimCounts(stack.redis, createKeySpace(stack.namespace)).of([pool])).get(pool);

  async function finished(jobId: string): Promise<JobRecord> {
    const record = await stack.client.wait(jobId, { timeoutMs: 30_000 });
    expect(record.state, `${record.reason}\n${stack.logs().slice(-3000)}`).toBe('succeeded');
    return record;
  }

  it('fills pools to min, and a job naming the template runs in a member with its own env bound late', async () => {
    await expect.poll(async () => (await ready('warm')).length, { timeout: 30_000 }).toBe(2);
    await expect.poll(async () => (await ready('reserved')).length, { timeout: 30_000 }).toBe(1);
    const before = new Set((await ready('warm')).map((m) => m.id));
    // Idle members hold no slot: no job runs, and no slot lease is held.
    expect(await stack.redis.zcard(createKeySpace(stack.namespace).leasesGlobal)).toBe(0);

    const { jobId } = await stack.client.submit({
      id: id('hit'),
      template: 'warm',
      env: { EXTRA: 'late' },
      steps: [{ command: 'sh', args: ['-c', 'echo hi $GREETING $EXTRA'] }],
    });
    const record = await finished(jobId);
    expect(record.sandbox?.start).toEqual({ kind: 'warm' });
    expect(before.has(record.sandbox?.member as string)).toBe(true);
    await expect.poll(() => claims('warm'), { timeout: 10_000 }).toEqual({ hits: 1, misses: 0 });
    expect(await outputLines(stack.client, jobId)).toEqual(['step-1:hi hello late']);
    // The pool is refilled to its min, without the claimed member (it served once, and went).
    await expect.poll(async () => (await ready('warm')).length, { timeout: 30_000 }).toBe(2);
    expect((await ready('warm')).map((m) => m.id)).not.toContain(record.sandbox?.member);
    await expect
      .poll(async () => await pools.get(record.sandbox?.member as string), { timeout: 30_000 })
      .toBeNull();
    if (env.SANDBOX_TYPE === undefined) {
      const registry = await stack.redis.hgetall(DEFAULT_INPROCESS_REGISTRY_KEY);
      expect(Object.keys(registry)).not.toContain(record.sandbox?.member);
    }
  }, 90_000);

  it('starts cold, saying why, when the request asks for what a member cannot take on', async () => {
    const { jobId } = await stack.client.submit({
      id: id('differs'),
      template: 'warm',
      resources: { limits: { cpu: '1' } },
      steps: [{ command: 'true' }],
    });
    const record = await finished(jobId);
    expect(record.sandbox?.start).toEqual({ kind: 'cold', reason: 'spec-differs: resources' });
    expect(record.sandbox?.member).toBeUndefined();
    await expect.poll(() => claims('warm'), { timeout: 10_000 }).toEqual({ hits: 1, misses: 1 });
  }, 60_000);

  it('serves a request with labels warm: labels bind late, like env', async () => {
    await expect.poll(async () => (await ready('warm')).length, { timeout: 30_000 }).toBeGreaterThan(0);
    const { jobId } = await stack.client.submit({
      id: id('labelled'),
      template: 'warm',
      labels: { team: 'search', 'example.com/run': 'r1' },
      steps: [{ command: 'true' }],
    });
    const record = await finished(jobId);
    expect(record.sandbox?.start).toEqual({ kind: 'warm' });
    expect((record.spec as { labels?: unknown }).labels).toEqual({ team: 'search', 'example.com/run': 'r1' });
  }, 60_000);

  it('serves a reserved pool only to its tenants', async () => {
    const other = await finished(
      (
        await stack.client.submit({
          id: id('other'),
          tenant: 'other',
          template: 'reserved',
          steps: [{ command: 'true' }],
        })
      ).jobId,
    );
    expect(other.sandbox?.start).toEqual({ kind: 'cold', reason: 'tenant-not-allowed' });
    const acme = await finished(
      (
        await stack.client.submit({
          id: id('acme'),
          tenant: 'acme',
          template: 'reserved',
          steps: [{ command: 'true' }],
        })
      ).jobId,
    );
    expect(acme.sandbox?.start).toEqual({ kind: 'warm' });
  }, 60_000);

  it('gives a live sandbox a member: create -> exec output', async () => {
    await expect.poll(async () => (await ready('warm')).length, { timeout: 30_000 }).toBe(2);
    const sandbox = await stack.client.sandboxes.create({ template: 'warm' });
    try {
      const run = await sandbox.exec(['sh', '-c', 'echo live $GREETING']);
      expect(run.exitCode).toBe(0);
      expect(run.stdout.trim()).toBe('live hello');
      const record = await stack.client.get(sandbox.id);
      expect(record?.sandbox?.start).toEqual({ kind: 'warm' });
    } finally {
      await sandbox.close();
    }
  }, 60_000);

  it('follows an edit of the templates file: the changed pool shrinks and its members are replaced', async () => {
    const old = new Set((await ready('warm')).map((m) => m.id));
    writeFileSync(templatesFile, templates(image, 'bonjour', 1));
    await expect
      .poll(
        async () => {
          const members = (await pools.all()).filter((m) => m.pool === 'warm' && m.state !== 'claimed');
          return members.length === 1 && members.every((m) => !old.has(m.id) && m.state === 'ready');
        },
        { timeout: 40_000, interval: 200 },
      )
      .toBe(true);
    const { jobId } = await stack.client.submit({
      id: id('edited'),
      template: 'warm',
      steps: [{ command: 'sh', args: ['-c', 'echo hi $GREETING'] }],
    });
    const record = await finished(jobId);
    expect(record.sandbox?.start).toEqual({ kind: 'warm' });
    expect(await outputLines(stack.client, jobId)).toEqual(['step-1:hi bonjour']);
  }, 90_000);

  it('replaces members that never become ready, never holding more than the pool max', async () => {
    await expect
      .poll(
        () => stack.logs().match(/"pool":"broken".*warm pool member (did not start|retired)/g)?.length ?? 0,
        {
          timeout: 30_000,
        },
      )
      .toBeGreaterThanOrEqual(2);
    expect(brokenSamples.length).toBeGreaterThan(10);
    expect(Math.max(...brokenSamples)).toBeLessThanOrEqual(2);
    brokenSamples = [];
  }, 60_000);
});

// Issue 19: refills after a burst must not starve cold starts of other templates. Refills run
// beside the start worker at POOL_REFILL_CONCURRENCY (here 1, so refilling 6 members is six boots
// one after another); a cold job submitted with the burst must finish before the refill does.
// Without the separate bound (refills taking the start worker's turns), it would wait behind them.
describe('warm pools: refills after a burst (in-process backend)', () => {
  let stack: Stack;
  let pools: WarmPoolStore;
  const file = join(scratch, 'templates-burst.yaml');

  beforeAll(async () => {
    writeFileSync(
      file,
      `
templates:
  burst:
    image: debian:bookworm-slim
    pool: { min: 6, max: 6 }
  plain:
    image: debian:bookworm-slim
`,
    );
    stack = await startStack({
      label: 'pools-burst',
      env: {
        SANDSTREAM_TEMPLATES_FILE: file,
        POOL_KEEPER_INTERVAL_MS: '200',
        POOL_REFILL_CONCURRENCY: '1',
        SCHEDULER_GLOBAL_SLOTS: '20',
        SCHEDULER_TENANT_SLOTS: '20',
      },
    });
    pools = new WarmPoolStore(stack.redis, createKeySpace(stack.namespace));
  }, 60_000);

  afterAll(async () => {
    const namespace = stack?.namespace;
    await stack?.stop();
    const redis = new Redis(testRedisUrl());
    if (namespace) await destroyPoolMembers(redis, namespace, {});
    redis.disconnect();
  }, 60_000);

  const readyMembers = async () =>
    (await pools.all()).filter((m) => m.pool === 'burst' && m.state === 'ready');

  it('a cold start of another template finishes before the burst pool is refilled', async () => {
    await expect.poll(async () => (await readyMembers()).length, { timeout: 60_000 }).toBe(6);
    const first = new Set((await readyMembers()).map((m) => m.id));
    const burst = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        stack.client.submit({
          id: `${stack.namespace}-burst-${i}`,
          template: 'burst',
          steps: [{ command: 'true' }],
        }),
      ),
    );
    const cold = await stack.client.submit({
      id: `${stack.namespace}-cold`,
      template: 'plain',
      steps: [{ command: 'true' }],
    });
    const records = await Promise.all(
      [...burst, cold].map(({ jobId }) => stack.client.wait(jobId, { timeoutMs: 60_000 })),
    );
    for (const r of records) expect(r.state, `${r.id}: ${r.reason}`).toBe('succeeded');
    expect(records.slice(0, 6).map((r) => r.sandbox?.start?.kind)).toEqual(Array(6).fill('warm'));
    const coldRecord = records[6] as JobRecord;
    expect(coldRecord.sandbox?.start?.kind).toBe('cold');

    // The refill: six new members, each ready at its own time; the last one marks its end.
    await expect
      .poll(async () => (await readyMembers()).filter((m) => !first.has(m.id)).length, { timeout: 60_000 })
      .toBe(6);
    const refilledAt = Math.max(...(await readyMembers()).map((m) => m.readyAt ?? 0));
    expect(coldRecord.finishedAt).toBeDefined();
    expect(coldRecord.finishedAt as number).toBeLessThan(refilledAt);
  }, 180_000);
});
