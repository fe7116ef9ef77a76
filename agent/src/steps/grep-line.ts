import { Limits } from '@sandstream/wire/lean';

/**
 * Shared by both grep engines so that they report identical matches.
 *
 * `column` is 1-based and counted in UTF-8 bytes, as ripgrep (and grep, vim) count it.
 * `text` is the line without its line ending; a line over `Limits.grepMaxLineChars` is cut to
 * a window of that many characters that keeps the start of the match (minified files would
 * otherwise put megabytes into one result).
 */
export function matchText(
  line: string,
  matchStart: number,
  maxChars: number = Limits.grepMaxLineChars,
): string {
  if (line.length <= maxChars) return line;
  // Up to 100 characters of context before the match, never running past the line's end.
  const start = Math.max(0, Math.min(matchStart - 100, line.length - maxChars));
  return line.slice(start, start + maxChars);
}

export function byteColumn(line: string, matchStart: number): number {
  return Buffer.byteLength(line.slice(0, matchStart), 'utf8') + 1;
}

/** Drops the line ending ripgrep leaves on a matched line ("\n" or "\r\n"). */
export function stripLineEnding(line: string): string {
  if (line.endsWith('\r\n')) return line.slice(0, -2);
  if (line.endsWith('\n')) return line.slice(0, -1);
  return line;
}

/** Files larger than this are skipped by both engines (ripgrep via --max-filesize). */
export const GREP_MAX_FILE_BYTES = 16 * 1024 * 1024;
