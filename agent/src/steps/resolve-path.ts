import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { failed } from './outcome.js';
import type { StepOutcome } from './step-context.js';

/** What path resolution needs of a step's context. */
export interface PathContext {
  /** The agent's working directory: relative paths start there. */
  baseDirectory: string;
  /**
   * File steps may not leave baseDirectory (the in-process backend, where the agent runs on the
   * host as its user: no container is the boundary). Off in a container or pod, whose file
   * system is the sandbox's own.
   */
  confineFiles?: boolean | undefined;
  /** Confined only: directories outside baseDirectory a link may lead to (the in-process volumes). */
  confineAllow?: readonly string[] | undefined;
}

/**
 * Where a step's relative paths start: its workingDirectory (itself relative to the agent's
 * base directory) or the base directory. Absolute paths are taken as they are: in a container
 * the sandbox boundary is the container, not the agent. Run steps, shells and terminals use this
 * unconfined everywhere: a process can go wherever its user can anyway.
 */
export function stepDirectory(baseDirectory: string, workingDirectory: string | null | undefined): string {
  return workingDirectory ? path.resolve(baseDirectory, workingDirectory) : path.resolve(baseDirectory);
}

/**
 * A file step's target. Confined, the base directory stands for `/`: an absolute path resolves
 * inside it (`/etc/passwd` is `<base>/etc/passwd`) and `..` stops at it, as in a chroot.
 */
export function resolveStepPath(
  ctx: PathContext,
  workingDirectory: string | null | undefined,
  target: string,
): string {
  if (!ctx.confineFiles) return path.resolve(stepDirectory(ctx.baseDirectory, workingDirectory), target);
  const start = path.posix.resolve('/', workingDirectory ?? '.');
  return path.resolve(ctx.baseDirectory, `.${path.posix.resolve(start, target)}`);
}

/**
 * Confined only: refuses a target whose nearest existing ancestor (the target itself when it
 * exists) is reached through a symbolic link that leads out of the base directory; lexical
 * confinement alone would follow such a link. Null when the target is inside.
 */
export async function confinementFailure(ctx: PathContext, target: string): Promise<StepOutcome | null> {
  if (!ctx.confineFiles) return null;
  const root = await realpath(ctx.baseDirectory);
  const roots = [
    root,
    ...(await Promise.all((ctx.confineAllow ?? []).map((p) => realpath(p).catch(() => p)))),
  ];
  let existing = target;
  for (;;) {
    try {
      const real = await realpath(existing);
      if (roots.some((r) => real === r || real.startsWith(`${r}${path.sep}`))) return null;
      return failed(
        'invalid_step',
        `path ${target} leads out of the sandbox's directory (through a symbolic link to ${real}); file steps on this backend stay inside it`,
      );
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const parent = path.dirname(existing);
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || parent === existing) return null;
      existing = parent;
    }
  }
}
