import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { freezeProcessTree } from './process-control.js';
import { descendants, descendantsByChildren, descendantsByScan } from './process-tree.js';

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.pid) process.kill(-child.pid, 'SIGKILL');
});

/** A shell with two sleeping children and a sub-shell holding a grandchild, in its own group. */
async function tree(): Promise<{ root: number; expected: number }> {
  const child = spawn('sh', ['-c', 'sleep 300 & sleep 300 & sh -c "sleep 300 & wait" & echo up; wait'], {
    detached: true,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  started.push(child);
  await new Promise((resolve) => child.stdout?.once('data', resolve));
  // sleep, sleep, sh, and the sub-shell's sleep: four below the root once all have forked.
  await expect.poll(() => descendantsByScan(child.pid as number).then((d) => d.length)).toBe(4);
  return { root: child.pid as number, expected: 4 };
}

function state(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] as string;
}

describe('process tree below a sandbox agent', () => {
  it("finds the same descendants from the kernel's children lists as from a scan of /proc", async () => {
    const { root, expected } = await tree();
    const byChildren = await descendantsByChildren(root);
    expect(byChildren).toHaveLength(expected);
    expect([...byChildren].sort()).toEqual([...(await descendantsByScan(root))].sort());
    expect([...(await descendants(root))].sort()).toEqual([...byChildren].sort());
  });

  it('freezes every descendant (grandchildren too) but not the root, and thaws them', async () => {
    const { root } = await tree();
    const below = await descendants(root);
    expect(below).toHaveLength(4);
    const thaw = await freezeProcessTree(root, null);
    try {
      for (const pid of below) await expect.poll(() => state(pid)).toBe('T');
      expect(state(root)).not.toBe('T');
    } finally {
      thaw();
    }
    for (const pid of below) await expect.poll(() => state(pid)).not.toBe('T');
  });
});
