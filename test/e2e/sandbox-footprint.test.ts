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
    const sandbox = await stack.client.sandboxes.create({ id });

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
    for (const kind of [':in', ':events', ':heartbeat', ':tty:']) {
      expect(running.some((key) => key.includes(kind))).toBe(true);
    }
    expect(running.filter((key) => !describedBy(footprint, key))).toEqual([]);

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
