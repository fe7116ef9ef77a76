import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { descendants } from './process-tree.js';

/**
 * The kernel's start time of a process (clock ticks since boot, /proc/<pid>/stat field 22).
 * Stored next to the pid so a later check can tell "our agent" from an unrelated process that
 * got the same pid after ours died. Null where /proc is not available.
 */
export async function processStartTime(pid: number): Promise<string | null> {
  try {
    // Read in place: /proc is answered from memory, and fs/promises' readFile would be four
    // thread-pool round trips (open, fstat, read, close) for a line of text, on every liveness
    // check (a start's, a destroy's, each list()'s).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses; fields after it follow the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = rest[0];
    if (state === 'Z' || state === 'X') return null;
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

function signalExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when `pid` is alive and, where /proc can tell, is still the process that started at `startTime`. */
export async function isProcessAlive(pid: number, startTime: string | null): Promise<boolean> {
  if (!signalExists(pid)) return false;
  if (startTime === null) return true;
  return (await processStartTime(pid)) === startTime;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * SIGTERM to the whole process group (the agent and anything it left in its group), then
 * SIGKILL after `termGraceMs` if the leader still lives.
 */
export async function terminateProcessGroup(
  pgid: number,
  startTime: string | null,
  termGraceMs = 2000,
): Promise<void> {
  if (!(await isProcessAlive(pgid, startTime))) {
    // The leader is gone. Stragglers may still hold its group id; that id cannot belong to a new
    // group unless a process with pid == pgid exists again, in which case the pid was reused and
    // the group is not ours to signal.
    if (!signalExists(pgid)) signalGroup(pgid, 'SIGKILL');
    return;
  }
  signalGroup(pgid, 'SIGTERM');
  const until = Date.now() + termGraceMs;
  while (Date.now() < until) {
    if (!(await isProcessAlive(pgid, startTime))) break;
    await sleep(25);
  }
  signalGroup(pgid, 'SIGKILL');
}

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * SIGKILL, no grace, to the agent's process group and every process below the agent (a run
 * step leads its own group). Everything found is stopped (SIGSTOP) first, so nothing forks or
 * writes while the tree is walked; a second walk catches what forked before it was stopped.
 */
export async function killProcessTree(pid: number, startTime: string | null): Promise<void> {
  if (!(await isProcessAlive(pid, startTime))) return;
  const found = new Set<number>();
  for (let pass = 0; pass < 2; pass++) {
    for (const child of await descendants(pid)) {
      if (found.has(child)) continue;
      found.add(child);
      signalPid(child, 'SIGSTOP');
    }
  }
  signalPid(pid, 'SIGSTOP');
  for (const child of found) signalPid(child, 'SIGKILL');
  signalGroup(pid, 'SIGKILL');
}

/**
 * Stops (SIGSTOP) every process below the agent, twice walked as killProcessTree does, so a
 * snapshot reads files nothing writes; the agent itself keeps answering (it writes only on file
 * steps, and those wait in its queue). Returns the thaw.
 */
export async function freezeProcessTree(pid: number, startTime: string | null): Promise<() => void> {
  const found = new Set<number>();
  if (await isProcessAlive(pid, startTime)) {
    for (let pass = 0; pass < 2; pass++) {
      for (const child of await descendants(pid)) {
        if (found.has(child)) continue;
        found.add(child);
        signalPid(child, 'SIGSTOP');
      }
    }
  }
  return () => {
    for (const child of found) signalPid(child, 'SIGCONT');
  };
}

/** SIGCONT to every process below the agent: undoes a freeze whose thaw never ran. */
export async function thawProcessTree(pid: number, startTime: string | null): Promise<void> {
  if (!(await isProcessAlive(pid, startTime))) return;
  for (const child of await descendants(pid)) signalPid(child, 'SIGCONT');
}
