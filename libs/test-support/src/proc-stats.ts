import { readdirSync, readFileSync } from 'node:fs';

/** Kernel clock ticks per second (USER_HZ): 100 on Linux x86-64. */
const TICKS_PER_SECOND = 100;

/** The fields of /proc/<pid>/stat after the command name (so field 14, utime, is index 11). */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of a whole process (all its threads), in ms, from /proc/<pid>/stat (10 ms ticks). */
export function processCpuMs(pid: number): number {
  const fields = statFields(pid);
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

/**
 * cutime + cstime: the CPU of a process's children that exited and were waited for (and of
 * their own waited-for children), in ms. For a service that starts agents as child processes,
 * the agents' CPU once they are gone.
 */
export function exitedChildrenCpuMs(pid: number): number {
  const fields = statFields(pid);
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / TICKS_PER_SECOND;
}

/**
 * Time on a CPU of a process's live threads, in ms, from /proc/<pid>/task/<tid>/schedstat
 * (nanoseconds, so exact where /proc/<pid>/stat counts 10 ms ticks). Threads that already
 * exited are not counted: read it while the process still runs.
 */
export function processRunTimeMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // The thread exited between the listing and the read.
    }
  }
  return ns / 1e6;
}

/** The pids of a process's direct children (every thread's list: a child belongs to the thread that forked it). */
export function childPids(pid: number): number[] {
  const pids: number[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (text) pids.push(...text.split(' ').map(Number));
    } catch {
      // The thread exited between the listing and the read.
    }
  }
  return pids;
}

/** Every live process below `pid` (children, theirs, …); a process gone meanwhile ends its branch. */
export function descendantPids(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    let kids: number[] = [];
    try {
      kids = childPids(p);
    } catch {
      return;
    }
    for (const k of kids) {
      out.push(k);
      walk(k);
    }
  };
  walk(pid);
  return out;
}

/** Resident set size of a process in kB, from /proc/<pid>/status. */
export function rssKb(pid: number): number {
  return statusKb(pid, 'VmRSS');
}

/** Peak resident set size of a process in kB (VmHWM: the kernel's own high-water mark, so no sample can miss the peak). */
export function peakRssKb(pid: number): number {
  return statusKb(pid, 'VmHWM');
}

/** A kB field of /proc/<pid>/status (VmRSS, VmHWM, RssAnon, RssFile, …). */
export function statusKb(pid: number, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(
    readFileSync(`/proc/${pid}/status`, 'utf8'),
  );
  if (!match) throw new Error(`no ${field} for pid ${pid}`);
  return Number(match[1]);
}

/**
 * A kB field of /proc/<pid>/smaps_rollup (Anonymous, Private_Dirty, Rss, …): the process's
 * mappings summed by the kernel. Anonymous counts what no file backs (heaps, stacks, copies),
 * the memory a process really takes from its node.
 */
export function smapsRollupKb(pid: number, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(
    readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'),
  );
  if (!match) throw new Error(`no ${field} in smaps_rollup of pid ${pid}`);
  return Number(match[1]);
}
