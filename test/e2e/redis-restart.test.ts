import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobRecord } from '@sandstream/bus';
import { JobNotFoundError } from '@sandstream/client';
import {
  DEFAULT_INPROCESS_REGISTRY_KEY,
  InProcessBackend,
  SandboxLabels,
  SandboxSpecSchema,
} from '@sandstream/sandbox';
import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isProcessAlive } from '../../libs/sandbox/src/inprocess/process-control.js';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { waitAll } from './job-helpers.js';

// The whole stack (four services, in-process sandboxes, one Redis user per sandbox) on a private
// redis-server with AOF that the suite kills -9. One outage of 30 s covers every service and the
// SDK's wait(); then a restart without any data.
const scratch = mkdtempSync(join(tmpdir(), 'e2e-redis-restart-'));
const JOBS = 8;
const STEPS = 3;
const OUTAGE_MS = 30_000;
/** How the old waitFor helper polled: every 100 ms, for up to 20 s. */
const poll = { timeout: 20_000, interval: 100 };

/** The suite's own clients see the outages on purpose: no "Unhandled error event" noise. */
function quiet(client: Redis): Redis {
  client.on('error', () => {});
  return client;
}

describe('Redis crash and restart under running jobs', () => {
  let redis: RedisServer;
  let stack: Stack;
  beforeAll(async () => {
    redis = await startRedisServer({ appendOnly: true });
    stack = await startStack({
      label: 'rr',
      redis: () => quiet(new Redis(redis.url, { maxRetriesPerRequest: null })),
      env: {
        REDIS_URL: redis.url,
        SANDBOX_ACL: 'on',
        REAPER_INTERVAL_SECONDS: '1',
        REAPER_SANDBOX_GRACE_SECONDS: '3',
        CLAIM_IDLE_MS: '2000',
        LEASE_SECONDS: '10',
      },
    });
    mkdirSync(join(scratch, 'runs'), { recursive: true });
  });
  afterAll(async () => {
    await stack?.stop();
    await redis?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const readiness = async () =>
    Promise.all(
      [...stack.services.values()].flat().map(async (s) => {
        try {
          return (await fetch(`http://127.0.0.1:${s.port}/readyz`)).status;
        } catch {
          return 0;
        }
      }),
    );
  const exited = () =>
    [...stack.services.values()]
      .flat()
      .filter((s) => s.child.exitCode !== null || s.child.signalCode !== null)
      .map((s) => `${s.name} exited ${s.child.exitCode ?? s.child.signalCode}`);

  it('kill -9 mid-flight, 30 s down, back with its AOF: every job finishes, no step runs twice, no service dies', async () => {
    const ids: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const file = join(scratch, 'runs', `a${i}`);
      const steps = Array.from({ length: STEPS }, (_, s) => ({
        command: `echo step-${s + 1} >> ${file}; sleep 1`,
        shell: true,
      }));
      ids.push((await stack.client.submit({ id: `${stack.namespace}-a${i}`, image: 'none', steps })).jobId);
    }
    // One more job whose user cannot come back: pod-lifecycle restores the users of the jobs its
    // index lists as running, and this one is taken out of the index (as a crash between a
    // transition and its index update would). It must end promptly, saying why.
    const lockedOut = `${stack.namespace}-locked-out`;
    await stack.client.submit({ id: lockedOut, image: 'none', steps: [{ command: 'sleep', args: ['100'] }] });
    // The SDK waits through the whole outage.
    const waited = stack.client.wait(ids[0] as string);
    // Steps running in every job, and the locked-out job running.
    await vi.waitUntil(() => ids.every((_, i) => existsSync(join(scratch, 'runs', `a${i}`))), poll);
    await vi.waitUntil(async () => (await stack.client.get(lockedOut))?.state === 'running', poll);
    await stack.redis.zrem(`${stack.namespace}:jobs:state:running`, lockedOut);
    await redis.kill();
    await vi.waitUntil(async () => (await readiness()).every((s) => s === 503), poll);
    // The outage itself: its length is what the services must ride out.
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    expect(exited()).toEqual([]);
    await redis.start();

    const records = await waitAll(stack.client, ids, 120_000);
    const failed = [...records.values()].filter((r) => r.state !== 'succeeded');
    expect(
      failed.map((r) => `${r.id}: ${r.state} ${r.reason}`),
      stack.logs().slice(-6000),
    ).toEqual([]);
    for (let i = 0; i < JOBS; i++) {
      const lines = readFileSync(join(scratch, 'runs', `a${i}`), 'utf8')
        .trim()
        .split('\n');
      expect(lines, `job a${i}`).toEqual(['step-1', 'step-2', 'step-3']);
    }
    expect((await waited).state).toBe('succeeded');
    const locked = (await waitAll(stack.client, [lockedOut], 60_000)).get(lockedOut);
    expect(locked?.state).toBe('failed');
    expect(locked?.reason).toMatch(/Redis user \S+ no longer exists/);
    expect(exited()).toEqual([]);
    await vi.waitUntil(async () => (await readiness()).every((s) => s === 200), { ...poll, timeout: 30_000 });
  }, 240_000);

  it('restarted empty: new jobs succeed within seconds, a vanished job is reported, only its own sandboxes go', async () => {
    const longId = `${stack.namespace}-long`;
    await stack.client.submit({ id: longId, image: 'none', steps: [{ command: 'sleep', args: ['120'] }] });
    // Waiting since the submit: the SDK has seen the job when its record vanishes.
    const vanished = stack.client.wait(longId).then(
      () => 'resolved',
      (err: unknown) => err,
    );
    const running = await vi.waitUntil(async () => {
      const r = await stack.client.get(longId);
      return r?.state === 'running' ? r : undefined;
    }, poll);
    expect(running.state).toBe('running');
    const registered = await stack.redis.hget(DEFAULT_INPROCESS_REGISTRY_KEY, longId);
    const sandbox = JSON.parse(registered ?? '{}') as {
      pid: number;
      startTime: string | null;
      stateDir: string;
    };
    expect(sandbox.pid).toBeGreaterThan(0);

    // Another installation's sandbox on the same engine (same in-process root): never ours to touch.
    const foreignRedis = quiet(new Redis(redis.url, { maxRetriesPerRequest: null }));
    const foreign = new InProcessBackend({ redis: foreignRedis });
    const foreignId = `${stack.namespace}-foreign`;
    const foreignRef = await foreign.create({
      jobId: foreignId,
      tenant: 'default',
      spec: SandboxSpecSchema.parse({
        image: 'none',
        command: ['sleep', '300'],
        labels: { [SandboxLabels.installation]: 'someone-else' },
      }),
      agent: { redisUrl: redis.url, keyStyle: 'tagged' },
    });

    await redis.kill();
    await redis.start({ empty: true });
    const back = Date.now();

    const { jobId } = await stack.client.submit({
      id: `${stack.namespace}-after`,
      image: 'none',
      steps: [{ command: 'echo', args: ['ok'] }, { command: 'true' }],
    });
    const after: JobRecord = await stack.client.wait(jobId, { timeoutMs: 60_000 });
    expect(after.state, stack.logs().slice(-4000)).toBe('succeeded');
    const seconds = (Date.now() - back) / 1000;
    expect(seconds).toBeLessThan(30);

    const outcome = await vanished;
    expect(outcome).toBeInstanceOf(JobNotFoundError);
    expect((outcome as Error).message).toContain('not found (Redis lost its data?)');

    // The vanished job's agent and its directory go once the reaper's grace has passed.
    await vi.waitUntil(
      async () => !(await isProcessAlive(sandbox.pid, sandbox.startTime)) && !existsSync(sandbox.stateDir),
      { timeout: 60_000, interval: 250 },
    );
    const others = await foreign.list();
    const still = others.find((s) => s.jobId === foreignId);
    expect(still?.labels[SandboxLabels.installation]).toBe('someone-else');
    expect(still?.state).toBe('running');
    await foreign.destroy(foreignRef, { graceMs: 0 });
    foreignRedis.disconnect();
    expect(exited()).toEqual([]);
  }, 180_000);
});
