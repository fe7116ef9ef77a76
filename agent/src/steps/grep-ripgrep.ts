import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { GrepMatch } from '@sandstream/wire';
import { attempt, isObject, notSure, num } from '@sandstream/wire/lean';
import { byteColumn, GREP_MAX_FILE_BYTES, matchText, stripLineEnding } from './grep-line.js';
import type { GrepEngineResult, GrepQuery } from './grep-query.js';
import { failed } from './outcome.js';

/** ripgrep prints text as `{text}` when it is valid UTF-8 and as base64 `{bytes}` otherwise. */
type RgData = { text: string } | { bytes: string };
interface RgMatchData {
  path: RgData;
  lines: RgData;
  line_number: number;
  submatches: { start: number }[];
}

/**
 * Checked by hand rather than with zod (the agent's start-up heap holds no schema: docs/benchmarks.md,
 * "Idle agent memory, part 3"): ripgrep's own output, so what does not fit is skipped, as before.
 */
function rgData(value: unknown): RgData {
  if (!isObject(value)) return notSure();
  if (typeof value.text === 'string') return { text: value.text };
  if (typeof value.bytes === 'string') return { bytes: value.bytes };
  return notSure();
}

function rgMatch(json: unknown): RgMatchData | undefined {
  if (!isObject(json) || json.type !== 'match') return undefined;
  return attempt(() => {
    const data = isObject(json.data) ? json.data : notSure();
    const submatches = Array.isArray(data.submatches) ? (data.submatches as unknown[]) : notSure();
    return {
      path: rgData(data.path),
      lines: rgData(data.lines),
      line_number: num(data, 'line_number', { int: true, positive: true }),
      submatches: submatches.map((m) => ({
        start: isObject(m) ? num(m, 'start', { int: true, min: 0 }) : notSure(),
      })),
    };
  });
}

/** stderr kept for error messages; ripgrep can print one line per unreadable file. */
const STDERR_KEEP_BYTES = 8 * 1024;

/**
 * Searches with `rg --json`. The flags make it behave like the builtin engine: no config file,
 * no ignore files, hidden files skipped, symlinks not followed, binary files skipped, files over
 * GREP_MAX_FILE_BYTES skipped, CRLF treated as a line ending, results in path order (which also
 * makes them deterministic). ripgrep's -m is per file, so the total limit is enforced here by
 * stopping ripgrep once one match more than the limit arrived.
 */
export function grepWithRipgrep(rg: string, query: GrepQuery): Promise<GrepEngineResult> {
  const args = [
    '--json',
    '--no-config',
    '--no-ignore',
    '--sort=path',
    '--crlf',
    `--max-filesize=${GREP_MAX_FILE_BYTES}`,
    `--max-count=${query.maxMatches + 1}`,
    query.ignoreCase ? '--ignore-case' : '--case-sensitive',
    ...(query.fixedStrings ? ['--fixed-strings'] : []),
    ...(query.glob !== undefined ? [`--glob=${query.glob}`] : []),
    // --regexp= and -- keep a pattern or path starting with "-" from being read as a flag.
    `--regexp=${query.pattern}`,
    '--',
    // A directory is searched as "." from inside it: ripgrep anchors globs such as "src/*.ts"
    // to the path it was given, so an absolute path would make them never match.
    query.filePath !== null ? query.root : '.',
  ];
  return new Promise((resolve) => {
    const cwd = query.filePath !== null ? path.dirname(query.root) : query.root;
    const child = spawn(rg, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const matches: GrepMatch[] = [];
    let truncated = false;
    let sawSummary = false;
    let stderr = '';
    let settled = false;
    const settle = (result: GrepEngineResult) => {
      if (settled) return;
      settled = true;
      query.signal.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const onAbort = () => {
      child.kill('SIGKILL');
      settle({ failure: failed('cancelled', 'grep was cancelled') });
    };
    query.signal.addEventListener('abort', onAbort, { once: true });
    if (query.signal.aborted) onAbort();

    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_KEEP_BYTES) stderr += chunk.toString('utf8');
    });
    const lines = createInterface({ input: child.stdout, crlfDelay: Number.POSITIVE_INFINITY });
    lines.on('line', (line) => {
      if (truncated || settled) return;
      let json: unknown;
      try {
        json = JSON.parse(line);
      } catch {
        return;
      }
      if (isObject(json) && json.type === 'summary') sawSummary = true;
      const match = rgMatch(json);
      if (!match) return;
      if (matches.length === query.maxMatches) {
        truncated = true;
        // We have all we will return: stop ripgrep instead of letting it search the rest.
        child.kill('SIGTERM');
        return;
      }
      matches.push(toMatch(match, query));
    });

    child.once('error', (err) => {
      settle({ failure: failed('internal', `ripgrep (${rg}) could not be started: ${err.message}`) });
    });
    child.once('close', (code) => {
      if (truncated || code === 0 || code === 1) {
        settle({ matches, truncated });
        return;
      }
      const detail = stderr.trim().slice(0, 2000);
      if (/regex parse error|error parsing glob|regex could not be compiled/i.test(detail)) {
        settle({ failure: failed('invalid_step', `invalid pattern or glob: ${detail}`) });
      } else if (sawSummary) {
        // Exit 2 after a full search: some files could not be read. The matches are still valid.
        settle({ matches, truncated });
      } else {
        settle({ failure: failed('io_error', `ripgrep failed (exit code ${code}): ${detail}`) });
      }
    });
  });
}

function decodeData(data: RgData): string {
  return 'text' in data ? data.text : Buffer.from(data.bytes, 'base64').toString('utf8');
}

function toMatch(data: RgMatchData, query: GrepQuery): GrepMatch {
  const line = stripLineEnding(decodeData(data.lines));
  const startByte = data.submatches[0]?.start ?? 0;
  // ripgrep counts bytes; the text cut needs a character index.
  const startChar = Buffer.from(line, 'utf8').subarray(0, startByte).toString('utf8').length;
  const file = decodeData(data.path);
  return {
    path: query.filePath ?? path.relative(query.root, path.resolve(query.root, file)),
    line: data.line_number,
    column: byteColumn(line, startChar),
    text: matchText(line, startChar),
  };
}
