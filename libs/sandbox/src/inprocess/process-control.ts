import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The kernel's start time of a process (clock ticks since boot, /proc/<pid>/stat field 22).
 * Stored next to the pid so a later check can tell "our agent" from an unrelated process that
 * got the same pid after ours died. Null where /proc is not available.
 */
export async function processStartTime(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
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
