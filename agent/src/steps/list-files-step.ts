import type { Stats } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { FileEntry, ListFilesStep } from '@sandstream/wire';
import { fsFailure, notADirectory } from './fs-errors.js';
import { failed, succeeded } from './outcome.js';
import { resolveStepPath } from './resolve-path.js';
import type { StepContext, StepOutcome } from './step-context.js';

interface PendingDirectory {
  absolute: string;
  relative: string;
  depth: number;
}

/**
 * Lists a directory down to maxDepth, breadth first, so that when maxEntries cuts the listing
 * the caller still gets the shallow entries (the overview) rather than the inside of whichever
 * directory sorts first. Within a directory names are taken in sorted order; the returned
 * entries are sorted as a tree (a, a/x, b), so the same tree always gives the same answer.
 *
 * Symlinks are listed as `symlink` and never followed, which also rules out loops. Directories
 * report sizeBytes 0 (their st_size depends on the file system). Subdirectories we may not read
 * are listed but not descended into.
 */
export async function listFilesStep(step: ListFilesStep, ctx: StepContext): Promise<StepOutcome> {
  const root = resolveStepPath(ctx, step.workingDirectory, step.path);
  const notDirectory = await notADirectory(root);
  if (notDirectory) return notDirectory;

  const entries: FileEntry[] = [];
  let truncated = false;
  const queue: PendingDirectory[] = [{ absolute: root, relative: '', depth: 1 }];
  for (let next = queue.shift(); next && !truncated; next = queue.shift()) {
    if (ctx.signal.aborted) return failed('cancelled', 'listFiles was cancelled');
    let names: string[];
    try {
      names = (await readdir(next.absolute)).sort(compareNames);
    } catch (err) {
      if (next.depth === 1) {
        const known = fsFailure(err, 'path', root);
        if (known) return known;
        throw err;
      }
      continue; // Unreadable subdirectory (or removed meanwhile): it is already listed.
    }
    // Once full, the directories still waiting are read all the same (room 0): the listing is
    // cut only if one of them has an entry, so exactly full is not reported as cut.
    const room = step.maxEntries - entries.length;
    if (names.length > room) {
      truncated = true;
      names = names.slice(0, room);
    }
    const infos = await Promise.all(names.map((name) => lstatOrNull(path.join(next.absolute, name))));
    names.forEach((name, i) => {
      const info = infos[i];
      if (!info) return; // Vanished between readdir and lstat.
      const relative = next.relative ? `${next.relative}/${name}` : name;
      const type = entryType(info);
      entries.push({ path: relative, type, sizeBytes: type === 'directory' ? 0 : info.size });
      if (type === 'directory' && next.depth < step.maxDepth) {
        queue.push({ absolute: path.join(next.absolute, name), relative, depth: next.depth + 1 });
      }
    });
  }
  entries.sort((a, b) => compareTreePaths(a.path, b.path));
  return succeeded({ kind: 'listFiles', path: root, entries, truncated });
}

function entryType(info: Stats): FileEntry['type'] {
  if (info.isSymbolicLink()) return 'symlink';
  if (info.isDirectory()) return 'directory';
  if (info.isFile()) return 'file';
  return 'other';
}

async function lstatOrNull(file: string): Promise<Stats | null> {
  try {
    return await lstat(file);
  } catch {
    return null;
  }
}

/** Plain code-unit order: locale-independent, so every agent sorts alike. */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Segment by segment, so a directory's contents follow it directly: "a", "a/x", "a-b". */
export function compareTreePaths(a: string, b: string): number {
  const left = a.split('/');
  const right = b.split('/');
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const order = compareNames(left[i] as string, right[i] as string);
    if (order !== 0) return order;
  }
  return left.length - right.length;
}
