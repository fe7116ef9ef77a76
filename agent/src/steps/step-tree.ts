import { randomUUID } from 'node:crypto';
import { closeSync, openSync, readSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Every process a run step started, wherever it went: into a session of its own (`setsid`), or
 * out of the leader's tree (a double fork re-parents it). The containers we run in do not give us
 * a cgroup of our own to put a step in (Docker's default mounts /sys/fs/cgroup read-only, and so
 * do Kubernetes and gVisor), so a step's processes are found from /proc by three marks, any of
 * which attributes a process, and its descendants, to the step:
 *
 *  - the step's leader: its pid, its process group and its session (pgid = sid = leader pid);
 *  - the environment variable STEP_MARKER_VARIABLE, set to a value unique to this launch: every
 *    descendant inherits it unless it clears its environment (readable in /proc/<pid>/environ for
 *    processes of our own uid);
 *  - the tree under the spawner helper, a child subreaper: an orphan is re-parented to it, so
 *    everything a step leaves is a descendant of the helper, and only that tree is searched
 *    (with Node's launcher there is no subreaper and the whole of /proc is searched).
 *
 * What escapes: a process that calls setsid *and* clears its environment *and* whose parent
 * exits. The pids limit of the sandbox still bounds it, and closing the sandbox ends it.
 */
export const STEP_MARKER_VARIABLE = 'SANDSTREAM_STEP_ID';

/** A marker value for one launch: unique even when two agents share a host (in-process backend). */
export function newStepMarker(stepId: string): string {
  return `${stepId}.${randomUUID()}`;
}

export interface StepTree {
  /** The process the step started (pgid = sid = pid). */
  leader: number;
  /** Its STEP_MARKER_VARIABLE value. */
  marker: string;
  /**
   * The subreaper its orphans re-parent to (the spawner helper), when there is one. It is one
   * thread (agent/native/spawner.c starts none), so its children are all on its main thread's list.
   */
  reaper?: number | undefined;
}

interface ProcStat {
  pid: number;
  ppid: number;
  pgrp: number;
  session: number;
  state: string;
}

/** Fields 3-6 of /proc/<pid>/stat; the command name before them ends at the last ')'. */
async function readStat(pid: number): Promise<ProcStat | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return {
      pid,
      state: fields[0] ?? '',
      ppid: Number(fields[1]),
      pgrp: Number(fields[2]),
      session: Number(fields[3]),
    };
  } catch {
    return null; // ended while we looked
  }
}

const live = (s: ProcStat | null): s is ProcStat => s !== null && s.state !== 'Z' && s.state !== 'X';

/**
 * The children of `pid`, from /proc/<pid>/task/<tid>/children (each thread has its own list);
 * null when the process is gone (a dead helper's orphans went elsewhere) or the kernel does not
 * offer the file: the caller scans /proc instead.
 */
async function childrenOf(pid: number): Promise<number[] | null> {
  let tids: string[];
  try {
    tids = await readdir(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  const lists = await Promise.all(
    tids.map((tid) => readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch((err: unknown) => err)),
  );
  if (
    lists.some((l) => (l as NodeJS.ErrnoException).code === 'ENOENT') &&
    !lists.some((l) => typeof l === 'string')
  ) {
    return null;
  }
  const children: number[] = [];
  for (const list of lists) {
    if (typeof list !== 'string') continue;
    for (const word of list.split(' ')) if (word) children.push(Number(word));
  }
  return children;
}

/**
 * The children of a one-thread subreaper, read at once: a single small read of a list the kernel
 * writes, where the thread pool would take four hops (open, stat, read, close) and as many
 * wake-ups of the agent, for what is after most steps an empty list. Null when the file is not
 * there (the helper is gone, or the kernel offers no children lists).
 */
function reaperChildren(reaper: number): number[] | null {
  let fd: number;
  try {
    fd = openSync(`/proc/${reaper}/task/${reaper}/children`, 'r');
  } catch {
    return null;
  }
  let list = '';
  try {
    // A proc file has no size to stat: read until a read comes back short (the kernel fills
    // each read as far as the list goes), in one read for all but a crowded helper.
    for (;;) {
      const read = readSync(fd, childrenBuffer, 0, childrenBuffer.length, null);
      list += childrenBuffer.toString('latin1', 0, read);
      if (read < childrenBuffer.length) break;
    }
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
  const children: number[] = [];
  for (const word of list.split(' ')) if (word) children.push(Number(word));
  return children;
}

/** Reused by every look: a pid and a space each, room for ~500 children per read. */
const childrenBuffer = Buffer.alloc(4096);

/**
 * Every live process below `root` (not `root` itself), or null when children lists are not
 * offered. `top`: root's children, when they were read already.
 */
async function descendantsOf(root: number, top?: number[] | null): Promise<ProcStat[] | null> {
  top ??= await childrenOf(root);
  if (top === null) return null;
  if (top.length === 0) return [];
  const found: ProcStat[] = [];
  let level = top;
  const seen = new Set<number>([root]);
  while (level.length > 0) {
    const fresh = level.filter((pid) => !seen.has(pid));
    for (const pid of fresh) seen.add(pid);
    const stats = (await Promise.all(fresh.map(readStat))).filter(live);
    found.push(...stats);
    const next = await Promise.all(stats.map((s) => childrenOf(s.pid)));
    level = next.flatMap((c) => c ?? []);
  }
  return found;
}

async function everyProcess(): Promise<ProcStat[]> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return [];
  }
  const pids = names.filter((name) => /^[0-9]+$/.test(name)).map(Number);
  return (await Promise.all(pids.map(readStat))).filter(live);
}

async function carriesMarker(pid: number, marker: string): Promise<boolean> {
  try {
    // NUL-separated NAME=value entries; the marker value is unique, so one exact entry is enough.
    const environ = await readFile(`/proc/${pid}/environ`);
    return Buffer.concat([Buffer.from([0]), environ]).includes(`\0${STEP_MARKER_VARIABLE}=${marker}\0`);
  } catch {
    return false; // gone, or another user's
  }
}

/** The pids of the step's live processes (the leader too, while it runs). */
export async function stepProcesses(tree: StepTree): Promise<number[]> {
  const direct = tree.reaper !== undefined ? reaperChildren(tree.reaper) : null;
  // A step that left nothing, with no other step running, is answered without a thread-pool hop.
  if (direct !== null && direct.length === 0) return [];
  const underReaper = tree.reaper !== undefined ? await descendantsOf(tree.reaper, direct) : null;
  const candidates = underReaper ?? (await everyProcess());
  const byPid = new Map(candidates.map((s) => [s.pid, s]));
  const self = process.pid;
  const marked = new Set<number>();
  await Promise.all(
    candidates.map(async (s) => {
      if (s.pid === self || s.pid === tree.reaper) return;
      const byLeader = s.pid === tree.leader || s.pgrp === tree.leader || s.session === tree.leader;
      // Under the subreaper, environ is read only for its direct children (orphans and leaders):
      // anything deeper is attributed through its parent below. Without one, an orphan's parent
      // is whatever reaper the system has, so every process is asked.
      const ask = underReaper === null || s.ppid === tree.reaper;
      if (byLeader || (ask && (await carriesMarker(s.pid, tree.marker)))) marked.add(s.pid);
    }),
  );
  // Descendants of a marked process belong to the step too, whatever they did to their env.
  const belongs = (s: ProcStat): boolean => {
    const path: ProcStat[] = [];
    let at: ProcStat | undefined = s;
    while (at && !marked.has(at.pid) && path.length < 4096) {
      path.push(at);
      at = byPid.get(at.ppid);
    }
    if (!at || !marked.has(at.pid)) return false;
    for (const p of path) marked.add(p.pid);
    return true;
  };
  for (const s of candidates) belongs(s);
  marked.delete(self);
  if (tree.reaper !== undefined) marked.delete(tree.reaper);
  return [...marked];
}

function signalEach(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone meanwhile
    }
  }
}

export interface KillTreeOptions {
  /** The first signal (default SIGTERM); null: none, straight to freeze and SIGKILL. */
  signal?: NodeJS.Signals | null;
  /** Time between the first signal and SIGKILL. */
  graceMs: number;
  /** After SIGKILL, how long to keep killing what is still there before returning anyway. */
  settleMs: number;
  /** How often to look whether the tree is gone. */
  pollMs?: number;
}

/** At most this many freeze rounds: each stops what the last one found; a fork bomb runs out of pids first. */
const MAX_FREEZE_ROUNDS = 50;
/** SIGKILL rounds made even past `settleMs`: on a loaded machine the first may not be the last. */
const MIN_KILL_ROUNDS = 10;

/**
 * What of the step is left, while it is being killed. An empty look under the subreaper is
 * confirmed by a look through all of /proc: a kernel's children list is only reliable while
 * nothing around it exits (proc(5)), and here processes exit all the time, so one read can skip
 * a survivor. Only kills pay for it; a step that left nothing is never scanned twice.
 */
async function remaining(tree: StepTree): Promise<number[]> {
  const found = await stepProcesses(tree);
  if (found.length > 0 || tree.reaper === undefined) return found;
  return stepProcesses({ leader: tree.leader, marker: tree.marker });
}

/**
 * Ends every process of the step: the first signal to all of them, SIGKILL after `graceMs` to
 * what is left. Before the SIGKILL the tree is frozen (SIGSTOP, again and again until a round
 * finds nothing new), so a fork bomb cannot fork faster than we kill: a stopped process forks
 * nothing, and a child it forked just before is found in the next round through its parent or
 * its marker. Then SIGKILL to all, repeated until none is left or `settleMs` ran out.
 * `hard`: SIGKILL was needed; `left`: processes still there at the end (should be none).
 */
export async function killStepTree(
  tree: StepTree,
  options: KillTreeOptions,
): Promise<{ hard: boolean; left: number }> {
  const poll = options.pollMs ?? 25;
  let members = await stepProcesses(tree);
  if (members.length === 0) return { hard: false, left: 0 };
  const first = options.signal === undefined ? 'SIGTERM' : options.signal;
  if (first !== null && options.graceMs > 0) {
    signalEach(members, first);
    // A stopped job must wake to see the signal.
    signalEach(members, 'SIGCONT');
    const deadline = Date.now() + options.graceMs;
    for (;;) {
      members = await remaining(tree);
      if (members.length === 0) return { hard: false, left: 0 };
      if (Date.now() >= deadline) break;
      await sleep(Math.min(poll, deadline - Date.now()));
    }
  }
  const stopped = new Set<number>();
  for (let round = 0; round < MAX_FREEZE_ROUNDS; round++) {
    const fresh = members.filter((pid) => !stopped.has(pid));
    if (fresh.length === 0) break;
    signalEach(fresh, 'SIGSTOP');
    for (const pid of fresh) stopped.add(pid);
    members = await remaining(tree);
  }
  const settled = Date.now() + options.settleMs;
  for (let round = 1; ; round++) {
    signalEach(members, 'SIGKILL');
    members = await remaining(tree);
    if (members.length === 0 || (Date.now() >= settled && round >= MIN_KILL_ROUNDS)) break;
    await sleep(Math.min(poll, Math.max(0, settled - Date.now())));
  }
  return { hard: true, left: members.length };
}
