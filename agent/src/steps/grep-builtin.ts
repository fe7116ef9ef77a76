import type { Dirent } from 'node:fs';
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import v8 from 'node:v8';
import type { GrepMatch } from '@sandstream/wire';
import picomatch from 'picomatch';
import { byteColumn, GREP_MAX_FILE_BYTES, matchText } from './grep-line.js';
import type { GrepEngineResult, GrepQuery } from './grep-query.js';
import { failed } from './outcome.js';

/**
 * The grep engine for images without ripgrep. It walks the tree the way the ripgrep engine's
 * flags make ripgrep walk it (see grep-ripgrep.ts): depth first with names in byte order,
 * hidden entries and symlinks skipped, files with a NUL byte or over GREP_MAX_FILE_BYTES
 * skipped. Patterns are JavaScript regular expressions, tested line by line.
 *
 * Backtracking: a pattern such as `(a+)+$` takes exponential time in V8's default engine and
 * would freeze the agent's event loop (no heartbeat, no cancel). ripgrep's engine is linear.
 * So the first builtin search turns on V8's fallback to its linear-time engine after excessive
 * backtracking. That engine does not support the `u` flag, hence patterns are compiled without
 * it; patterns with backreferences or lookaround cannot fall back and stay unprotected.
 *
 * Files are read whole, one at a time, so memory stays at one file (at most GREP_MAX_FILE_BYTES).
 */
export async function grepBuiltin(query: GrepQuery): Promise<GrepEngineResult> {
  enableLinearFallback();
  let regex: RegExp;
  try {
    const source = query.fixedStrings ? escapeRegExp(query.pattern) : query.pattern;
    regex = new RegExp(source, query.ignoreCase ? 'i' : '');
  } catch (err) {
    return failure('invalid_step', `pattern is not a valid regular expression: ${(err as Error).message}`);
  }
  const matchesGlob = globMatcher(query.glob);
  const matches: GrepMatch[] = [];

  /** Returns true once more matches exist than the step asked for. */
  const searchFile = async (absolute: string, reported: string): Promise<boolean> => {
    const content = await readSearchable(absolute);
    if (content === null) return false;
    const lines = content.split('\n');
    // A final newline ends the last line; it does not start an empty one.
    if (lines.at(-1) === '') lines.pop();
    for (let i = 0; i < lines.length; i++) {
      let line = lines[i] as string;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      const found = regex.exec(line);
      if (!found) continue;
      if (matches.length === query.maxMatches) return true;
      matches.push({
        path: reported,
        line: i + 1,
        column: byteColumn(line, found.index),
        text: matchText(line, found.index),
      });
    }
    return false;
  };

  const walk = async (directory: string, relative: string): Promise<boolean> => {
    let entries: Dirent[];
    try {
      entries = await readdir(directory, { withFileTypes: true });
    } catch {
      return false; // Unreadable directory: skipped, as ripgrep skips it (with a warning).
    }
    entries.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
    for (const entry of entries) {
      if (query.signal.aborted) return false;
      if (entry.name.startsWith('.')) continue;
      const childRelative = relative ? `${relative}/${entry.name}` : entry.name;
      const childAbsolute = path.join(directory, entry.name);
      if (entry.isDirectory()) {
        if (await walk(childAbsolute, childRelative)) return true;
      } else if (entry.isFile() && matchesGlob(childRelative)) {
        if (await searchFile(childAbsolute, childRelative)) return true;
      }
    }
    return false;
  };

  const truncated =
    query.filePath !== null ? await searchFile(query.root, query.filePath) : await walk(query.root, '');
  if (query.signal.aborted) return failure('cancelled', 'grep was cancelled');
  return { matches, truncated };
}

function failure(...args: Parameters<typeof failed>): GrepEngineResult {
  return { failure: failed(...args) };
}

/**
 * A glob without "/" applies to the file name at any depth ("*.ts"); one with "/" to the path
 * relative to the searched directory ("src/*.ts") — the same split gitignore and ripgrep make.
 */
function globMatcher(glob: string | undefined): (relativePath: string) => boolean {
  if (glob === undefined) return () => true;
  const pattern = glob.startsWith('/') ? glob.slice(1) : glob;
  return picomatch(pattern, { dot: true, basename: !glob.includes('/') });
}

/** The file's text, or null when it is not something grep searches (binary, too large, unreadable). */
async function readSearchable(file: string): Promise<string | null> {
  try {
    const info = await lstat(file);
    if (!info.isFile() || info.size > GREP_MAX_FILE_BYTES) return null;
    const bytes = await readFile(file);
    if (bytes.includes(0)) return null;
    return bytes.toString('utf8');
  } catch {
    return null;
  }
}

let linearFallbackEnabled = false;

/** Process-wide, but it changes no result: only how V8 evaluates a regex that backtracks too much. */
function enableLinearFallback(): void {
  if (linearFallbackEnabled) return;
  v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');
  linearFallbackEnabled = true;
}

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}
