import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { GrepMatch } from '@sandstream/wire';
import * as z from 'zod';
import { byteColumn, GREP_MAX_FILE_BYTES, matchText, stripLineEnding } from './grep-line.js';
import type { GrepEngineResult, GrepQuery } from './grep-query.js';
import { failed } from './outcome.js';

/** ripgrep prints text as `{text}` when it is valid UTF-8 and as base64 `{bytes}` otherwise. */
const RgData = z.union([z.object({ text: z.string() }), z.object({ bytes: z.string() })]);
const RgMatch = z.object({
  type: z.literal('match'),
  data: z.object({
    path: RgData,
    lines: RgData,
    line_number: z.number().int().positive(),
    submatches: z.array(z.object({ start: z.number().int().nonnegative() })),
  }),
});
const RgType = z.object({ type: z.string() });

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
      const type = RgType.safeParse(json);
      if (type.success && type.data.type === 'summary') sawSummary = true;
      const parsed = RgMatch.safeParse(json);
      if (!parsed.success) return;
      if (matches.length === query.maxMatches) {
        truncated = true;
        // We have all we will return: stop ripgrep instead of letting it search the rest.
        child.kill('SIGTERM');
        return;
      }
      matches.push(toMatch(parsed.data.data, query));
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

function decodeData(data: z.infer<typeof RgData>): string {
  return 'text' in data ? data.text : Buffer.from(data.bytes, 'base64').toString('utf8');
}

function toMatch(data: z.infer<typeof RgMatch>['data'], query: GrepQuery): GrepMatch {
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
