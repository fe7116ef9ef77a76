import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { StatsStep } from '@sandstream/wire';
import { succeeded } from './outcome.js';
import { resolveStepPath } from './resolve-path.js';
import type { StepContext, StepOutcome } from './step-context.js';

/** The workspace walk stops here: a stats call must stay cheap whatever the tree holds. */
export const STATS_MAX_ENTRIES = 200_000;

/**
 * The sandbox's resource use, read without a shell (any image): its cgroup v2 files for CPU and
 * memory (a container's own cgroup under Docker and Kubernetes; on the in-process backend the
 * cgroup the agent shares with its host process), and a walk of the workspace (symlinks not
 * followed) for its size. What cannot be read is null rather than an error.
 */
export async function statsStep(step: StatsStep, ctx: StepContext): Promise<StepOutcome> {
  const root = resolveStepPath(ctx, step.workingDirectory, '.');
  const [cgroup, workspace] = await Promise.all([readCgroup(), walk(root, ctx.signal)]);
  return succeeded({ kind: 'stats', ...cgroup, ...workspace });
}

interface CgroupUsage {
  cpuSeconds: number | null;
  memoryBytes: number | null;
  memoryLimitBytes: number | null;
}

/** A limit this large (cgroup v1's "no limit", PAGE_COUNTER_MAX pages) means none. */
const UNLIMITED = 2 ** 60;

async function readCgroup(): Promise<CgroupUsage> {
  const lines = (await text('/proc/self/cgroup'))?.split('\n') ?? [];
  // "<id>:<controllers>:<path>"; v2 is "0::<path>", v1 lists memory and cpuacct separately.
  const pathOf = (controller: string) =>
    lines.map((l) => l.split(':')).find(([, names]) => (names ?? '').split(',').includes(controller))?.[2];
  const v2 = lines.find((l) => l.startsWith('0::'))?.slice(3);
  const [cpu, memory, limit] = await Promise.all([
    // v2: cpu.stat's usage_usec; v1: cpuacct.usage in nanoseconds.
    firstOf(
      cgroupFiles('', v2, 'cpu.stat'),
      (raw) => Number(/^usage_usec (\d+)$/m.exec(raw)?.[1]) / 1e6,
    ).then(
      (v) =>
        v ?? firstOf(cgroupFiles('cpuacct', pathOf('cpuacct'), 'cpuacct.usage'), (raw) => Number(raw) / 1e9),
    ),
    firstOf(cgroupFiles('', v2, 'memory.current'), Number).then(
      (v) => v ?? firstOf(cgroupFiles('memory', pathOf('memory'), 'memory.usage_in_bytes'), Number),
    ),
    firstOf(cgroupFiles('', v2, 'memory.max'), Number).then(
      (v) => v ?? firstOf(cgroupFiles('memory', pathOf('memory'), 'memory.limit_in_bytes'), Number),
    ),
  ]);
  return {
    cpuSeconds: cpu,
    memoryBytes: memory === null ? null : Math.round(memory),
    memoryLimitBytes: limit === null || limit >= UNLIMITED ? null : Math.round(limit),
  };
}

/**
 * Where a cgroup file may be: under the process's cgroup path, or at the mount's root (a
 * container sees its own cgroup as the root of the mount, whatever /proc/self/cgroup says).
 */
function cgroupFiles(controller: string, cgroupPath: string | undefined, file: string): string[] {
  if (cgroupPath === undefined) return [];
  const mount = path.join('/sys/fs/cgroup', controller);
  return [...new Set([path.join(mount, cgroupPath, file), path.join(mount, file)])];
}

/** The first of `files` that exists and parses to a finite number ("max" does not), else null. */
async function firstOf(files: string[], parse: (raw: string) => number): Promise<number | null> {
  for (const file of files) {
    const raw = await text(file);
    if (raw === null) continue;
    const value = parse(raw.trim());
    if (Number.isFinite(value)) return value;
  }
  return null;
}

async function walk(
  root: string,
  signal: AbortSignal,
): Promise<{ workspaceBytes: number; workspaceFiles: number; workspaceTruncated: boolean }> {
  let bytes = 0;
  let files = 0;
  let seen = 0;
  const pending = [root];
  while (pending.length > 0 && !signal.aborted) {
    const dir = pending.pop() as string;
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      if (++seen > STATS_MAX_ENTRIES)
        return { workspaceBytes: bytes, workspaceFiles: files, workspaceTruncated: true };
      const full = path.join(dir, name);
      const info = await lstat(full).catch(() => null);
      if (info?.isDirectory()) pending.push(full);
      else if (info?.isFile()) {
        files += 1;
        bytes += info.size;
      }
    }
  }
  return { workspaceBytes: bytes, workspaceFiles: files, workspaceTruncated: signal.aborted };
}

async function text(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return null;
  }
}
