import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer, connect as dial, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { freePort, repoRoot } from '@sandstream/test-support';
import { test } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, onTestFinished, vi } from 'vitest';
import { POLL, popResult, pushStep, readEvents, startAgent, stopAgent } from './testing/agent-harness.js';

// What a Redis restart does to a sandbox: its ACL user vanishes (users are not in the AOF) and
// comes back a few seconds later, re-created by pod-lifecycle from the password's hash.
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

const PASSWORD = 'sandbox-secret';
const rules = (jobId: string, password: string[]) => [
  'reset',
  'on',
  ...password,
  `~sandbox:${jobId}:*`,
  'resetchannels',
  '-@all',
  '+@all',
];

async function refusedFor(admin: Redis, username: string): Promise<boolean> {
  const log = (await admin.call('ACL', 'LOG')) as unknown[][];
  return log.some((entry) => entry.includes(username));
}

/**
 * A TCP proxy to Redis that, once the server refuses a login (-WRONGPASS), passes that reply on and
 * drops the connection before any later reply: what a slow machine makes of a refused reconnect.
 * ioredis, not waiting for AUTH (no ready check), resends the commands that were in flight when
 * the first connection broke; their NOAUTH replies never arrive, so they are never settled.
 */
async function refusalCuttingProxy(
  redisPort: number,
): Promise<{ server: Server; connections: () => number }> {
  let connections = 0;
  const server = createServer((client) => {
    connections += 1;
    const upstream = dial(redisPort, '127.0.0.1');
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      const refused = chunk.indexOf('-WRONGPASS');
      if (refused < 0) {
        client.write(chunk);
        return;
      }
      const lineEnd = chunk.indexOf('\r\n', refused) + 2;
      client.end(chunk.subarray(0, lineEnd));
      client.destroySoon();
      upstream.destroy();
    });
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, connections: () => connections };
}

/** The embedded Redis `npm start` runs (scripts/local-redis.mjs): its ACL file, its AOF. */
interface LocalRedisModule {
  startLocalRedis(options: { cacheDir: string; namespace: string; port?: number }): Promise<{
    url: string;
    port: number;
    paths: { pidFile: string };
    stop(): Promise<unknown>;
  }>;
}

/** True once a client of this private server (the agent's) is blocked in a BRPOP. */
async function popBlocked(admin: Redis): Promise<boolean> {
  const clients = (await admin.call('CLIENT', 'LIST')) as string;
  return clients.split('\n').some((line) => line.includes('cmd=brpop') && line.includes('flags=b'));
}

describe('agent whose Redis user disappears', () => {
  test('keeps its step, result and output while Redis refuses it, and goes on once the user is back', async ({
    redisServer: server,
  }) => {
    const admin = new Redis(server.url, { maxRetriesPerRequest: null });
    onTestFinished(() => admin.disconnect());
    const jobId = 'auth-retry-job';
    const username = 'sbx-auth-retry';
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`>${PASSWORD}`]));
    const agent = startAgent({
      jobId,
      redisUrl: `redis://${username}:${PASSWORD}@127.0.0.1:${server.port}`,
      // A short idle limit: refusals must not count as idle time.
      extraArgs: ['--idle-timeout-seconds', '1', '--max-idle-waits', '3', '--auth-retry-seconds', '60'],
    });
    cleanups.push(() => stopAgent(agent));

    await pushStep(admin, agent.keys, {
      schemaVersion: 1,
      stepId: 'during',
      command: 'sh',
      args: ['-c', 'sleep 2; echo still-here'],
    });
    await vi.waitUntil(
      async () => ((await readEvents(admin, agent.keys, 'during')).length > 0 ? true : undefined),
      POLL,
    );
    // DELUSER also closes the user's connections: the agent reconnects and is refused.
    await admin.call('ACL', 'DELUSER', username);
    await vi.waitUntil(async () => ((await refusedFor(admin, username)) ? true : undefined), POLL);
    // The outage: refused for longer than the agent's idle limit (3 s), as during a slow restart.
    await new Promise((r) => setTimeout(r, 4000));
    const hash = createHash('sha256').update(PASSWORD).digest('hex');
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`#${hash}`]));

    expect(await popResult(admin, agent.keys, 30)).toMatchObject({ stepId: 'during', exitCode: 0 });
    const lines = (await readEvents(admin, agent.keys, 'during')).filter((e) => e.kind === 'stdout');
    expect(lines.map((e) => e.line)).toEqual(['still-here']);
    await pushStep(admin, agent.keys, { schemaVersion: 1, stepId: 'after', command: 'true' });
    expect(await popResult(admin, agent.keys, 30)).toMatchObject({ stepId: 'after', exitCode: 0 });
    await pushStep(admin, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  }, 60_000);

  test('gives up with exit 3 and says why once refused for longer than --auth-retry-seconds', async ({
    redisServer: server,
  }) => {
    const admin = new Redis(server.url, { maxRetriesPerRequest: null });
    onTestFinished(() => admin.disconnect());
    const jobId = 'auth-gone-job';
    const username = 'sbx-auth-gone';
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`>${PASSWORD}`]));
    const agent = startAgent({
      jobId,
      redisUrl: `redis://${username}:${PASSWORD}@127.0.0.1:${server.port}`,
      // A long idle wait: the pop is surely in flight when the connection drops, which leaves it
      // in ioredis's resend queue, where no refusal ever settles it.
      extraArgs: ['--auth-retry-seconds', '2', '--idle-timeout-seconds', '5'],
    });
    cleanups.push(() => stopAgent(agent));
    await vi.waitUntil(async () => ((await admin.exists(agent.keys.heartbeat)) ? true : undefined), POLL);
    await vi.waitUntil(async () => ((await popBlocked(admin)) ? true : undefined), POLL);
    await admin.call('ACL', 'DELUSER', username);
    expect((await agent.exited).code).toBe(3);
    expect(agent.stderr()).toContain("refused this sandbox's credentials");
    expect(agent.stderr()).not.toContain(PASSWORD);
  }, 60_000);

  test("gives up with exit 3 even when its pop is caught in the client's resend cycle and never settles", async ({
    redisServer: server,
  }) => {
    const admin = new Redis(server.url, { maxRetriesPerRequest: null });
    onTestFinished(() => admin.disconnect());
    const proxy = await refusalCuttingProxy(server.port);
    cleanups.push(async () => proxy.server.close());
    const jobId = 'auth-stuck-job';
    const username = 'sbx-auth-stuck';
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`>${PASSWORD}`]));
    const agent = startAgent({
      jobId,
      redisUrl: `redis://${username}:${PASSWORD}@127.0.0.1:${(proxy.server.address() as AddressInfo).port}`,
      extraArgs: ['--auth-retry-seconds', '2', '--idle-timeout-seconds', '5'],
    });
    cleanups.push(() => stopAgent(agent));
    await vi.waitUntil(async () => ((await admin.exists(agent.keys.heartbeat)) ? true : undefined), POLL);
    await vi.waitUntil(async () => ((await popBlocked(admin)) ? true : undefined), POLL);
    const before = proxy.connections();
    await admin.call('ACL', 'DELUSER', username);
    expect((await agent.exited).code).toBe(3);
    expect(agent.stderr()).toContain("refused this sandbox's credentials");
    // Each refused reconnect counts as a failed attempt, so the three connections back off
    // (50 ms doubling) through the 2 s of refusals instead of reconnecting every 50 ms (~120).
    expect(proxy.connections() - before).toBeLessThan(60);
  }, 60_000);

  test('rides through a kill -9 of the shipped embedded Redis (ACL file, AOF): its user is gone until re-created', async () => {
    const { startLocalRedis } = (await import(
      pathToFileURL(join(repoRoot, 'scripts/local-redis.mjs')).href
    )) as LocalRedisModule;
    const cacheDir = mkdtempSync(join(tmpdir(), 'agent-auth-shipped-'));
    cleanups.push(async () => rmSync(cacheDir, { recursive: true, force: true }));
    const port = await freePort();
    let redis = await startLocalRedis({ cacheDir, namespace: 'auth-shipped', port });
    cleanups.push(() => redis.stop());
    let admin = new Redis(redis.url, { maxRetriesPerRequest: null });
    const jobId = 'auth-shipped-job';
    const username = 'sbx-auth-shipped';
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`>${PASSWORD}`]));
    const agent = startAgent({
      jobId,
      redisUrl: `redis://${username}:${PASSWORD}@127.0.0.1:${port}`,
      extraArgs: ['--idle-timeout-seconds', '1', '--max-idle-waits', '3', '--auth-retry-seconds', '60'],
    });
    cleanups.push(() => stopAgent(agent));
    await pushStep(admin, agent.keys, {
      schemaVersion: 1,
      stepId: 'across',
      command: 'sh',
      args: ['-c', 'sleep 3; echo after-restart'],
    });
    await vi.waitUntil(
      async () => ((await readEvents(admin, agent.keys, 'across')).length > 0 ? true : undefined),
      POLL,
    );
    // More than the AOF's fsync interval after the last write, then kill -9, as a crash does.
    await new Promise((r) => setTimeout(r, 1500));
    admin.disconnect();
    process.kill(Number(readFileSync(redis.paths.pidFile, 'utf8')), 'SIGKILL');
    await redis.stop();
    redis = await startLocalRedis({ cacheDir, namespace: 'auth-shipped', port });
    admin = new Redis(redis.url, { maxRetriesPerRequest: null });
    onTestFinished(() => admin.disconnect());
    // The ACL file holds only the admin: the sandbox's user went with the process.
    expect(((await admin.call('ACL', 'USERS')) as string[]).includes(username)).toBe(false);
    await vi.waitUntil(async () => ((await refusedFor(admin, username)) ? true : undefined), POLL);
    // Longer than the agent's idle limit, as pod-lifecycle takes a few seconds to re-create users.
    await new Promise((r) => setTimeout(r, 4000));
    const hash = createHash('sha256').update(PASSWORD).digest('hex');
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`#${hash}`]));

    // The step under way at the crash finishes: its result and its line arrive once let back in.
    expect(await popResult(admin, agent.keys, 30)).toMatchObject({ stepId: 'across', exitCode: 0 });
    const lines = (await readEvents(admin, agent.keys, 'across')).filter((e) => e.kind === 'stdout');
    expect(lines.map((e) => e.line)).toEqual(['after-restart']);
    await pushStep(admin, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  }, 60_000);
});
