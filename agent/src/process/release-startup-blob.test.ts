import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { pollUntil } from '@sandstream/test-support';
import { describe, expect, it } from 'vitest';
import {
  deleteKeys,
  popResult,
  pushStep,
  readEvents,
  seaCommand,
  startAgent,
  stopAgent,
  testClient,
} from '../testing/agent-harness.js';

const PT_NOTE = 4;

/** File offset and size of the executable's largest PT_NOTE segment: postject's NODE_SEA_BLOB. */
function blobSegment(executable: string): { offset: number; size: number } {
  const header = Buffer.alloc(64);
  const fd = openSync(executable, 'r');
  let table: Buffer;
  let entrySize: number;
  let count: number;
  try {
    readSync(fd, header, 0, 64, 0);
    entrySize = header.readUInt16LE(0x36);
    count = header.readUInt16LE(0x38);
    table = Buffer.alloc(entrySize * count);
    readSync(fd, table, 0, table.length, Number(header.readBigUInt64LE(0x20)));
  } finally {
    closeSync(fd);
  }
  let best = { offset: 0, size: 0 };
  for (let i = 0; i < count; i++) {
    const at = i * entrySize;
    if (table.readUInt32LE(at) !== PT_NOTE) continue;
    const size = Number(table.readBigUInt64LE(at + 32));
    if (size > best.size) best = { offset: Number(table.readBigUInt64LE(at + 8)), size };
  }
  return best;
}

/** Resident kB of the process's mapping of `file` that starts at file offset `offset`. */
function residentKb(pid: number, file: string, offset: number): number | undefined {
  let inMapping = false;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ ([0-9a-f]+) \S+ \d+\s+(.*)$/.exec(line);
    if (head) {
      inMapping = Number.parseInt(head[1] as string, 16) === offset && head[2] === file;
      continue;
    }
    const rss = inMapping ? /^Rss:\s+(\d+) kB/.exec(line) : null;
    if (rss) return Number(rss[1]);
  }
  return undefined;
}

/**
 * Issue 18's memory goal: the single executable's startup blob (~7 MB, read once while Node
 * starts) stops counting in the agent's RSS once the first heartbeat is out, and the agent works
 * as before afterwards.
 */
describe('the startup blob release', () => {
  it('gives back the pages of the single executable’s NODE_SEA_BLOB after boot, and steps still run', async () => {
    const command = seaCommand();
    const executable = command[3] as string;
    const blob = blobSegment(executable);
    expect(blob.size).toBeGreaterThan(1024 * 1024);
    const redis = testClient();
    const agent = startAgent({ command, extraArgs: ['--verbose'] });
    const pid = agent.child.pid as number;
    try {
      // Node reads the whole blob while it starts; the agent gives it back after its heartbeat.
      await pollUntil(
        'the agent to load the release module',
        () => agent.logs().some((l) => l.msg === 'startup blob released'),
        { timeoutMs: 20_000, intervalMs: 50 },
      );
      expect(await redis.exists(agent.keys.heartbeat)).toBe(1);
      const kb = residentKb(pid, executable, blob.offset);
      expect(kb).toBeDefined();
      expect((kb as number) * 1024).toBeLessThan(blob.size / 10);

      await pushStep(redis, agent.keys, {
        schemaVersion: 1,
        stepId: 'after',
        kind: 'run',
        command: 'echo',
        args: ['still here'],
      });
      const result = await popResult(redis, agent.keys);
      expect(result.exitCode).toBe(0);
      const lines = (await readEvents(redis, agent.keys, 'after')).filter((e) => e.kind === 'stdout');
      expect(lines.map((e) => e.line)).toEqual(['still here']);
    } finally {
      await stopAgent(agent);
      await deleteKeys(redis, agent.keys);
      await redis.quit();
    }
  }, 60_000);
});
