import { stat } from 'node:fs/promises';
import type { GrepStep } from '@sandstream/wire';
import { fsFailure } from './fs-errors.js';
import { grepBuiltin } from './grep-builtin.js';
import type { GrepQuery } from './grep-query.js';
import { grepWithRipgrep } from './grep-ripgrep.js';
import { failed, succeeded } from './outcome.js';
import { resolveStepPath } from './resolve-path.js';
import { findRipgrep } from './ripgrep-locator.js';
import type { StepContext, StepOutcome } from './step-context.js';

export interface GrepOptions {
  /** 'auto' uses ripgrep when it is on PATH; 'builtin' forces the fallback (tests, comparisons). */
  engine?: 'auto' | 'builtin';
  /** Locates ripgrep; replaceable so a test can pretend it is missing or point elsewhere. */
  locateRipgrep?: () => Promise<string | null>;
}

/** Searches a directory tree (or one file) for a pattern, with ripgrep when present. */
export async function grepStep(
  step: GrepStep,
  ctx: StepContext,
  options: GrepOptions = {},
): Promise<StepOutcome> {
  const root = resolveStepPath(ctx, step.workingDirectory, step.path);
  let isFile: boolean;
  try {
    const info = await stat(root);
    if (!info.isFile() && !info.isDirectory()) {
      return failed('invalid_step', `path ${root} is neither a file nor a directory`);
    }
    isFile = info.isFile();
  } catch (err) {
    const known = fsFailure(err, 'path', root);
    if (known) return known;
    throw err;
  }
  const query: GrepQuery = {
    root,
    filePath: isFile ? step.path : null,
    pattern: step.pattern,
    ignoreCase: step.ignoreCase,
    fixedStrings: step.fixedStrings,
    glob: step.glob,
    maxMatches: step.maxMatches,
    signal: ctx.signal,
  };
  const rg = options.engine === 'builtin' ? null : await (options.locateRipgrep ?? findRipgrep)();
  const result = rg ? await grepWithRipgrep(rg, query) : await grepBuiltin(query);
  if ('failure' in result) return result.failure;
  return succeeded({
    kind: 'grep',
    matches: result.matches,
    truncated: result.truncated,
    engine: rg ? 'ripgrep' : 'builtin',
  });
}
