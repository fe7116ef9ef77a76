import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

/**
 * Whether the kernel lists each thread's children (/proc/<pid>/task/<tid>/children,
 * CONFIG_PROC_CHILDREN): then a tree is walked from its root, a few reads per process in it,
 * instead of reading the stat of every process on the machine. The whole-/proc scan took
 * 84–450 ms a pass with 270 processes on a loaded 2-core machine, and a freeze makes two passes
 * (docs/benchmarks.md, "Fork path, third pass").
 */
const CHILDREN_LISTED = existsSync(`/proc/${process.pid}/task/${process.pid}/children`);

/** Every live descendant of `pid`, parents before children. */
export function descendants(pid: number): Promise<number[]> {
  return CHILDREN_LISTED ? descendantsByChildren(pid) : descendantsByScan(pid);
}

/**
 * From the children lists of every thread of each process (a child is listed under the thread
 * that forked it). Like the scan, this is a snapshot of a moving tree: callers stop what they
 * found and walk again.
 */
export async function descendantsByChildren(pid: number): Promise<number[]> {
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift() as number;
    const tasks = await readdir(`/proc/${parent}/task`).catch(() => [] as string[]);
    for (const tid of tasks) {
      const list = await readFile(`/proc/${parent}/task/${tid}/children`, 'utf8').catch(() => '');
      for (const child of list.split(' ')) {
        if (!/^\d+$/.test(child)) continue;
        found.push(Number(child));
        queue.push(Number(child));
      }
    }
  }
  return found;
}

/** By parent pid, from the stat of every process in /proc: any kernel with /proc. */
export async function descendantsByScan(pid: number): Promise<number[]> {
  const children = new Map<number, number[]>();
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (!Number.isFinite(ppid)) continue;
    const list = children.get(ppid) ?? [];
    list.push(Number(name));
    children.set(ppid, list);
  }
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = children.get(queue.shift() as number) ?? [];
    found.push(...next);
    queue.push(...next);
  }
  return found;
}
