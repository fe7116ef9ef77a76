import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentAnnouncements, createKeySpace } from '@sandstream/bus';
import {
  type CreateSandboxRequest,
  InProcessBackend,
  SandboxSpecSchema,
  SandboxStartError,
} from '@sandstream/sandbox';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Readiness by event: real agents (the in-process backend's child processes), the shared Redis,
// and the announcement they PUBLISH on their ready channel once their first heartbeat is written.
const url = testRedisUrl();
const suffix = Math.random().toString(36).slice(2, 10);
const ns = `t-ready-${suffix}`;
const keys = createKeySpace(ns);
const redis = new Redis(url, { maxRetriesPerRequest: null });
const subscriber = new Redis(url, { maxRetriesPerRequest: null });
const announcements = new AgentAnnouncements(subscriber);
const root = mkdtempSync(join(tmpdir(), 'sandstream-ready-'));
const registryKey = `${ns}:inprocess`;
const backend = new InProcessBackend({ redis, root, registryKey, idleTimeoutSeconds: 60 });
const jobIds: string[] = [];

beforeAll(async () => {
  await announcements.start();
});

afterAll(async () => {
  for (const jobId of jobIds) {
    await backend.destroy({ jobId, backend: 'inprocess', id: '0' }, { graceMs: 0 }).catch(() => undefined);
  }
  await announcements.close();
  await deleteNamespaceKeys(redis, ns);
  subscriber.disconnect();
  redis.disconnect();
  rmSync(root, { recursive: true, force: true });
});

function request(name: string, command?: string[]): CreateSandboxRequest {
  const jobId = `${ns}-${name}`;
  jobIds.push(jobId);
  return {
    jobId,
    tenant: 'acme',
    spec: SandboxSpecSchema.parse({ image: 'local', ...(command ? { command } : {}) }),
    agent: { redisUrl: url, keyStyle: 'tagged' as const },
  };
}

describe('agent readiness by announcement', () => {
  it('is ready on the agent’s announcement, without polling its heartbeat', async () => {
    const req = request('ok');
    const wait = announcements.expect(req.jobId);
    let heartbeatReads = 0;
    try {
      const ref = await backend.create(req);
      await backend.waitReady(ref, 30_000, {
        isAgentAlive: async () => {
          heartbeatReads++;
          return (await redis.exists(keys.sandbox(req.jobId).heartbeat)) === 1;
        },
        agentAnnounced: (timeoutMs) => wait.next(timeoutMs),
      });
    } finally {
      wait.close();
    }
    // The announcement follows the first heartbeat: a waiter that hears it finds the agent alive.
    expect(await redis.exists(keys.sandbox(req.jobId).heartbeat)).toBe(1);
    // Polling would have read the heartbeat every 15 ms for the whole boot.
    expect(heartbeatReads).toBe(0);
    expect(announcements.pending).toBe(0);
  });

  it('reports an agent that crashes at boot at once, with its last output, while waiting for the announcement', async () => {
    const req = request('crash', ['/bin/sh', '-c', 'sleep 0.3; echo agent exploded >&2; exit 3']);
    const wait = announcements.expect(req.jobId);
    const ref = await backend.create(req);
    const started = Date.now();
    const failure = await backend
      .waitReady(ref, 30_000, {
        isAgentAlive: async () => false,
        agentAnnounced: (timeoutMs) => wait.next(timeoutMs),
      })
      .catch((err: unknown) => err)
      .finally(() => wait.close());
    expect(failure).toBeInstanceOf(SandboxStartError);
    expect(failure).toMatchObject({ reason: 'agent_crashed' });
    expect((failure as Error).message).toMatch(/agent exploded/);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('notices the crash of an agent another replica started within the slow liveness check', async () => {
    const req = request('crash-elsewhere', ['/bin/sh', '-c', 'sleep 0.3; echo gone >&2; exit 4']);
    const ref = await backend.create(req);
    // A second backend on the same registry, like another pod-lifecycle replica: no exit event.
    const other = new InProcessBackend({ redis, root, registryKey, idleTimeoutSeconds: 60 });
    const wait = announcements.expect(req.jobId);
    const started = Date.now();
    const failure = await other
      .waitReady(ref, 30_000, {
        isAgentAlive: async () => false,
        agentAnnounced: (timeoutMs) => wait.next(timeoutMs),
      })
      .catch((err: unknown) => err)
      .finally(() => wait.close());
    expect(failure).toMatchObject({ reason: 'agent_crashed' });
    expect((failure as Error).message).toMatch(/gone/);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('still applies the start deadline', async () => {
    const req = request('silent', ['/bin/sh', '-c', 'sleep 30']);
    const wait = announcements.expect(req.jobId);
    const ref = await backend.create(req);
    const started = Date.now();
    const failure = await backend
      .waitReady(ref, 800, {
        isAgentAlive: async () => false,
        agentAnnounced: (timeoutMs) => wait.next(timeoutMs),
      })
      .catch((err: unknown) => err)
      .finally(() => wait.close());
    expect(failure).toMatchObject({ reason: 'deadline' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(750);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
