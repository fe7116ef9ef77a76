import { realpathSync } from 'node:fs';
import path from 'node:path';
import type { PathContext } from './resolve-path.js';
import type { StepOutcome } from './step-context.js';

/**
 * A confined agent (the in-process backend) runs on the host in a directory that stands for the
 * sandbox's `/` (resolve-path.ts). What it answers must not name that directory: a missing file
 * is `path /data/x.txt does not exist`, as a container would say, never the host's
 * `/tmp/sandstream/<job>/workspace/data/x.txt`. This rewrites the directory (as given, and as
 * its real path, which Node's own messages may name) to `/` in the outcome's error message and
 * in the `path` of its structured output. An unconfined agent's paths are the sandbox's own.
 */
export function inSandboxView(outcome: StepOutcome, ctx: PathContext): StepOutcome {
  if (!ctx.confineFiles) return outcome;
  const roots = rootsOf(ctx.baseDirectory);
  const message = outcome.errorMessage ? rewrite(outcome.errorMessage, roots) : outcome.errorMessage;
  const output =
    outcome.output && 'path' in outcome.output && typeof outcome.output.path === 'string'
      ? { ...outcome.output, path: rewrite(outcome.output.path, roots) }
      : outcome.output;
  if (message === outcome.errorMessage && output === outcome.output) return outcome;
  return { ...outcome, errorMessage: message, ...(output ? { output } : {}) };
}

const cachedRoots = new Map<string, RegExp[]>();

/** Patterns matching the base directory as a whole path prefix (not `/base2`), longest first. */
function rootsOf(baseDirectory: string): RegExp[] {
  let roots = cachedRoots.get(baseDirectory);
  if (roots) return roots;
  const given = path.resolve(baseDirectory);
  let real = given;
  try {
    real = realpathSync(given);
  } catch {
    // Gone (a step removed it): the given form is all there is to hide.
  }
  roots = [...new Set([given, real])]
    .filter((root) => root !== '/')
    .sort((a, b) => b.length - a.length)
    .map((root) => new RegExp(`${root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![^/\\s'"\`:;,)\\]])`, 'g'));
  cachedRoots.set(baseDirectory, roots);
  return roots;
}

function rewrite(text: string, roots: RegExp[]): string {
  let out = text;
  for (const root of roots) {
    // `<root>/a/b` becomes `/a/b`, `<root>` alone becomes `/`.
    out = out.replace(root, (match, offset: number, whole: string) =>
      whole[offset + match.length] === '/' ? '' : '/',
    );
  }
  return out;
}
