import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Signals a whole process group. A run step's child is spawned `detached`, so it leads its own
 * group and everything it starts (unless it calls setsid) shares that group: signalling
 * `-pgid` reaches grandchildren that signalling the child alone would leave running.
 *
 * Returns false when the group no longer exists (ESRCH); other errors (EPERM) are thrown,
 * since they mean we could not stop something we started.
 */
export function signalProcessGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/**
 * True while a live (non-zombie) process of the group exists. `kill(-pgid, 0)` alone is not
 * enough: a killed grandchild stays a zombie until whoever inherited it reaps it, which some
 * init processes do late or never, and we would then wait out the whole grace for nothing.
 * So on Linux we read the group members' states from /proc; elsewhere we fall back to signal 0.
 */
export async function processGroupAlive(pgid: number): Promise<boolean> {
  if (!signalExists(pgid)) return false;
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((name) => /^[0-9]+$/.test(name));
  } catch {
    return true;
  }
  const states = await Promise.all(pids.map((pid) => groupAndState(pid)));
  return states.some((s) => s !== null && s.pgrp === pgid && s.state !== 'Z' && s.state !== 'X');
}

function signalExists(pgid: number): boolean {
  try {
    return signalProcessGroup(pgid, 0);
  } catch {
    // EPERM: it exists, we just may not signal it.
    return true;
  }
}

/** Fields 3 (state), 5 (pgrp) and 6 (session) of /proc/<pid>/stat; the command name before them may contain anything but ends at the last ')'. */
async function groupAndState(pid: string): Promise<{ state: string; pgrp: number; session: number } | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '', pgrp: Number(fields[2]), session: Number(fields[3]) };
  } catch {
    // The process ended while we looked.
    return null;
  }
}

export interface KillGroupOptions {
  /** The first signal (default SIGTERM); SIGKILL follows after graceMs. */
  signal?: NodeJS.Signals;
  /** Time between the first signal and SIGKILL. */
  graceMs: number;
  /** After SIGKILL, how long to wait for the group to disappear before returning anyway. */
  settleMs: number;
  /** How often to look whether the group is gone. */
  pollMs?: number;
}

/**
 * SIGTERM to the group, then SIGKILL if any member is still there after `graceMs`. The SIGKILL
 * goes out even when the group leader already exited: a grandchild that ignores SIGTERM must not
 * outlive the step. Resolves as soon as the group is gone (polling), so a process that obeys
 * SIGTERM is not waited on for the whole grace. `hard` says whether SIGKILL was needed.
 *
 * The settle bound exists because members can linger as zombies when nobody reaps them (an
 * agent running as PID 1 inherits orphans); we must not hang on those.
 */
export async function killProcessGroup(pgid: number, options: KillGroupOptions): Promise<{ hard: boolean }> {
  const poll = options.pollMs ?? 25;
  if (!signalProcessGroup(pgid, options.signal ?? 'SIGTERM')) return { hard: false };
  if (await waitUntilGone(pgid, options.graceMs, poll)) return { hard: false };
  signalProcessGroup(pgid, 'SIGKILL');
  await waitUntilGone(pgid, options.settleMs, poll);
  return { hard: true };
}

async function waitUntilGone(pgid: number, withinMs: number, pollMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (await processGroupAlive(pgid)) {
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await sleep(Math.min(pollMs, left));
  }
  return true;
}

/**
 * The live processes of session `sid`. A terminal's shell puts each job in a process group of
 * its own, so only the session (the terminal's) holds all of them. Linux only (/proc); elsewhere
 * the leader's group is all we find.
 */
async function sessionMembers(sid: number): Promise<number[]> {
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((name) => /^[0-9]+$/.test(name));
  } catch {
    return signalExists(sid) ? [sid] : [];
  }
  const members: number[] = [];
  await Promise.all(
    pids.map(async (pid) => {
      const s = await groupAndState(pid);
      if (s && s.session === sid && s.state !== 'Z' && s.state !== 'X') members.push(Number(pid));
    }),
  );
  return members;
}

function signalEach(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone meanwhile, or not ours to signal
    }
  }
}

/**
 * Ends every process of a session, as a terminal hangup would and then some: SIGHUP and SIGCONT
 * (a stopped job must wake to die), SIGKILL after `graceMs` to whatever is left, including a job
 * that ignored the hangup or left the leader's group.
 */
export async function killSession(sid: number, options: KillGroupOptions): Promise<{ hard: boolean }> {
  const poll = options.pollMs ?? 25;
  let members = await sessionMembers(sid);
  if (members.length === 0) return { hard: false };
  signalEach(members, options.signal ?? 'SIGHUP');
  signalEach(members, 'SIGCONT');
  const deadline = Date.now() + options.graceMs;
  for (;;) {
    members = await sessionMembers(sid);
    if (members.length === 0) return { hard: false };
    if (Date.now() >= deadline) break;
    await sleep(poll);
  }
  signalEach(members, 'SIGKILL');
  const settled = Date.now() + options.settleMs;
  while ((await sessionMembers(sid)).length > 0 && Date.now() < settled) await sleep(poll);
  return { hard: true };
}
