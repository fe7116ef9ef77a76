import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createKeySpace,
  isTerminal,
  type SandboxFootprint,
  sandboxFootprint,
  scanKeys,
} from '@sandstream/bus';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// The footprint (libs/bus sandbox-footprint.ts) is the one list of what a sandbox owns in Redis:
// every key a running sandbox really has must be one it names, and after the destroy nothing of
// it is left but what retention keeps. In-process backend, the four services as processes.

/** A footprint glob (only `*`) as a regular expression. */
function globRegExp(glob: string): RegExp {
  return new RegExp(
    `^${glob
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
}

function describedBy(footprint: SandboxFootprint, key: string): boolean {
  return footprint.named.includes(key) || footprint.perUse.some((glob) => globRegExp(glob).test(key));
}

describe('sandbox footprint', () => {
  let stack: Stack;
  let dir: string;
  beforeAll(async () => {
    stack = await startStack({ label: 'footprint' });
    dir = mkdtempSync(join(tmpdir(), 'footprint-'));
  });
  afterAll(async () => {
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function keysOf(footprint: SandboxFootprint): Promise<string[]> {
    const found = new Set<string>();
    for await (const batch of scanKeys(stack.redis, { match: footprint.match, count: 1000 })) {
      for (const key of batch) found.add(key);
    }
    return [...found].sort();
  }

  it('names every key a running sandbox has; after its destroy only its output stays', async () => {
    const id = `${stack.namespace}-fp`;
    const footprint = sandboxFootprint(createKeySpace(stack.namespace), id);
    const prefix = createKeySpace(stack.namespace).sandboxPrefix(id);
    // Redis' own record of every key any client (agent, services, SDK) touched under the sandbox's
    // prefix, the short-lived ones (a transfer's chunks, a step's result) included.
    const touched = new Set<string>();
    // ioredis' monitor() can fail its first reply on a busy server ("Command queue state error",
    // a MONITOR line taken for the reply of its own set-up); a new connection then works.
    let monitor: Redis | undefined;
    for (let attempt = 1; !monitor; attempt++) {
      monitor = await (stack.redis as Redis).monitor().catch((err: unknown) => {
        if (attempt >= 3) throw err;
        return undefined;
      });
    }
    monitor.on('monitor', (_time: string, args: string[]) => {
      const command = args[0]?.toLowerCase() ?? '';
      // Channels and ACL rules name the prefix too, but are not keys.
      if (/^(p?publish|p?subscribe|acl|scan)$/.test(command)) return;
      for (const arg of args.slice(1)) if (arg.startsWith(prefix) && !arg.includes('*')) touched.add(arg);
    });
    const sandbox = await stack.client.sandboxes.create({ id, image: 'debian:bookworm-slim' });

    // Every feature that writes keys: a command, a background process, a terminal, transfers.
    expect((await sandbox.exec(['sh', '-c', 'echo hi'])).stdout).toBe('hi\n');
    const server = await sandbox.processes.start(['sh', '-c', 'echo up; exec sleep 300']);
    const terminal = await sandbox.terminals.open({ cols: 80, rows: 24, command: ['/bin/sh'] });
    let screen = '';
    const reading = (async () => {
      for await (const chunk of terminal.output({ from: 'start' })) screen += chunk.toString('utf8');
    })();
    await terminal.write('echo "tty-$((6*7))"\n');
    await vi.waitUntil(() => screen.includes('tty-42'), { timeout: 20_000, interval: 50 });
    mkdirSync(join(dir, 'tree'));
    writeFileSync(join(dir, 'tree', 'a.txt'), 'alpha\n');
    await sandbox.files.upload(join(dir, 'tree'), 'in');
    await sandbox.files.downloadTo('in', join(dir, 'back'));
    await sandbox.files.write('note.txt', 'n\n');
    expect(await sandbox.files.read('note.txt')).toBe('n\n');

    const running = await keysOf(footprint);
    // Each kind of key was really made (or the comparison below proves little).
    console.log('footprint test: keys of the running sandbox', running);
    for (const kind of [':events', ':heartbeat', ':tty:']) {
      expect(
        running.some((key) => key.includes(kind)),
        kind,
      ).toBe(true);
    }
    expect(running.filter((key) => !describedBy(footprint, key))).toEqual([]);
    await stack.redis.ping(); // MONITOR delivers in order: what came before this is in
    await vi.waitUntil(() => touched.has(footprint.named[0] as string), { timeout: 10_000, interval: 50 });
    monitor.disconnect();
    console.log('footprint test: keys touched while it ran', [...touched].sort());
    for (const kind of [':in', ':result:', ':xfer:', ':tty:']) {
      expect(
        [...touched].some((key) => key.includes(kind)),
        kind,
      ).toBe(true);
    }
    expect([...touched].filter((key) => !describedBy(footprint, key))).toEqual([]);

    await sandbox.close();
    void reading.catch(() => undefined);
    expect(server.id).toBeTruthy();
    // The destroy runs after the close ended the record: wait for what it leaves.
    await vi.waitUntil(
      async () => {
        const record = await stack.client.get(id);
        const left = await keysOf(footprint);
        return (
          record !== null && isTerminal(record.state) && left.every((key) => footprint.retained.includes(key))
        );
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(await keysOf(footprint)).toEqual([...footprint.retained]);
  });
});
