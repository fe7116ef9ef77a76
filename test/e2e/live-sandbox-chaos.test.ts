import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Sandbox, SandstreamClient } from '@sandstream/client';
import { DEFAULT_INPROCESS_REGISTRY_KEY } from '@sandstream/sandbox';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

const redisUrl = testRedisUrl();

import { type Stack, startStack } from '../helpers/services-stack.js';

// Live sandboxes under failure and load: kill -9 of each service while 20 sandboxes run commands
// from several clients; a client that vanishes without closing; 10 sandboxes driven at once from
// one client. Every command appends its own marker to a file outside the sandboxes, so a command
// run twice shows up as a duplicate line and a lost one as a missing line.
const scratch = mkdtempSync(join(tmpdir(), 'e2e-live-chaos-'));
const SANDBOXES = 20;
const COMMANDS = 6;

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  await vi.waitUntil(check, { timeout: timeoutMs, interval: 100 }).catch(() => {
    throw new Error(`timed out waiting for ${what}`);
  });
}

describe('live sandboxes under kill -9 and load (in-process backend)', () => {
  let stack: Stack;
  const clients: SandstreamClient[] = [];
  beforeAll(async () => {
    stack = await startStack({
      label: 'lchaos',
      env: {
        SCHEDULER_GLOBAL_SLOTS: '24',
        SCHEDULER_TENANT_SLOTS: '24',
        CLAIM_IDLE_MS: '2000',
        LEASE_SECONDS: '10',
      },
    });
    for (let i = 0; i < 3; i++)
      clients.push(new SandstreamClient({ redis: new Redis(redisUrl), namespace: stack.namespace }));
  });
  afterAll(async () => {
    for (const c of clients) {
      await c.close();
      c.redis.disconnect();
    }
    await stack?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('loses no command, runs none twice and leaks no sandbox while each service is killed and restarted', async () => {
    const sandboxes: Sandbox[] = await Promise.all(
      Array.from({ length: SANDBOXES }, (_, i) =>
        (clients[i % clients.length] as SandstreamClient).sandboxes.create({
          id: `${stack.namespace}-s${i}`,
          image: 'none',
        }),
      ),
    );
    // Each sandbox is driven by two clients at once (the one that created it and another).
    const drive = async (i: number, client: SandstreamClient, half: 'a' | 'b') => {
      const sandbox = await client.sandboxes.connect(`${stack.namespace}-s${i}`);
      for (let c = 0; c < COMMANDS / 2; c++) {
        const marker = `${half}${c}`;
        const result = await sandbox.exec(
          `echo ${marker} >> ${join(scratch, `s${i}`)}; sleep 0.3; echo ${marker}`,
        );
        expect(result).toMatchObject({ exitCode: 0, stdout: `${marker}\n` });
      }
    };
    const driving = Promise.all(
      sandboxes.flatMap((_, i) => [
        drive(i, clients[i % clients.length] as SandstreamClient, 'a'),
        drive(i, clients[(i + 1) % clients.length] as SandstreamClient, 'b'),
      ]),
    );
    for (const name of stack.services.keys()) {
      // Spacing the crashes in time is the chaos itself: each lands while commands are in flight.
      await new Promise((r) => setTimeout(r, 400));
      await stack.crashAndRestart(name);
    }
    await driving;
    for (let i = 0; i < SANDBOXES; i++) {
      const lines = readFileSync(join(scratch, `s${i}`), 'utf8')
        .trim()
        .split('\n')
        .sort();
      const expected = ['a', 'b']
        .flatMap((h) => Array.from({ length: COMMANDS / 2 }, (_, c) => `${h}${c}`))
        .sort();
      expect(lines, `sandbox s${i}`).toEqual(expected);
    }
    // Every command's result is on its sandbox's record (the dispatcher recorded each, across its restart).
    // (A result is recorded a moment after its client saw it: poll until the last ones are in.)
    for (const sandbox of sandboxes) {
      await expect
        .poll(async () => (await sandbox.history()).map((c) => c.result?.exitCode), { timeout: 30_000 })
        .toEqual(Array(COMMANDS).fill(0));
    }
    await Promise.all(sandboxes.map((s) => s.close()));
    // No sandbox of this run is left on the backend.
    await until('every sandbox destroyed', async () => {
      const ids = Object.keys(await stack.redis.hgetall(DEFAULT_INPROCESS_REGISTRY_KEY));
      return !ids.some((id) => id.startsWith(`${stack.namespace}-s`));
    });
  });

  it('closes the sandbox of a client that vanished without close, once it is idle', async () => {
    const gone = new SandstreamClient({ redis: new Redis(redisUrl), namespace: stack.namespace });
    const sandbox = await gone.sandboxes.create({
      id: `${stack.namespace}-orphan`,
      image: 'none',
      idleTimeoutSeconds: 2,
    });
    await sandbox.exec(['true']);
    await gone.close();
    gone.redis.disconnect();
    await until('idle close', async () => (await stack.client.sandboxes.get(sandbox.id))?.state === 'closed');
    expect(await stack.client.sandboxes.get(sandbox.id)).toMatchObject({ state: 'closed', reason: 'idle' });
  });

  it('drives 10 sandboxes at once from one client', async () => {
    const client = clients[0] as SandstreamClient;
    const results = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        await using sandbox = await client.sandboxes.create({
          id: `${stack.namespace}-p${i}`,
          image: 'none',
        });
        await sandbox.files.write('n.txt', String(i));
        const out: string[] = [];
        for (let c = 0; c < 5; c++) out.push((await sandbox.exec(['cat', 'n.txt'])).stdout);
        return out;
      }),
    );
    results.forEach((out, i) => {
      // Output travels as lines: each one ends with a newline in stdout.
      expect(out).toEqual(Array(5).fill(`${i}\n`));
    });
  });
});
