import { open } from 'node:fs/promises';
import { type JobSpec, JobSpecSchema } from '@sandstream/bus';
import { describeIssue, formatBytes, formatPath, Limits, overLimit } from '@sandstream/wire';
import { type Document, isMap, isNode, isScalar, Lexer, LineCounter, Parser, parseDocument } from 'yaml';

import { SpecFileError } from './spec-file-error.js';

export { SpecFileError };

/**
 * How deep a job file may nest. A job spec needs about 6 levels; the YAML library composes
 * documents recursively, and 10,000 nested `[` make it exhaust the stack or even abort the
 * process, so deeper input is refused before it is composed.
 */
export const SPEC_FILE_MAX_DEPTH = 64;

/**
 * How far YAML aliases may expand (the `yaml` library's maxAliasCount: nodes reached through
 * aliases), so that a "billion laughs" file is refused instead of filling memory. Job files
 * rarely use aliases at all.
 */
export const SPEC_FILE_MAX_ALIAS_COUNT = 100;

/**
 * Reads a job file (YAML or JSON, which is YAML) and validates it with the one job spec schema.
 * Every error names the file and, where the field exists in the file, its line and column:
 * `job.yaml:7:14: steps.1.timeoutSeconds: timeoutSeconds must be positive`.
 */
export async function loadSpecFile(path: string, maxBytes: number = SPEC_FILE_MAX_BYTES): Promise<JobSpec> {
  return parseSpecText(await readSpecFile(path, maxBytes), path);
}

/**
 * The most a job file may hold: what a whole job spec may take as stored (Limits.jobSpecMaxBytes).
 * A file past it could only be refused at submit, after the YAML parser had spent some forty
 * times its size in memory (a 50 MB file took about 2 GB), so it is refused before it is read.
 */
export const SPEC_FILE_MAX_BYTES = Limits.jobSpecMaxBytes;

/**
 * The file's text, refused over `maxBytes`: a regular file by its size before any of it is read;
 * one without a size (a pipe, /dev/stdin) when it runs past the limit, having read no more.
 */
async function readSpecFile(path: string, maxBytes: number): Promise<string> {
  const cannot = (err: unknown) =>
    new SpecFileError(`${path}: cannot read the file: ${(err as Error).message}`);
  const handle = await open(path, 'r').catch((err: unknown) => Promise.reject(cannot(err)));
  try {
    const info = await handle.stat().catch((err: unknown) => Promise.reject(cannot(err)));
    if (info.isFile() && info.size > maxBytes) {
      throw new SpecFileError(`${path}: ${overLimit('the file', info.size, maxBytes)} for a job file`);
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.alloc(Math.min(1024 * 1024, maxBytes + 1 - total));
      const { bytesRead } = await handle
        .read(chunk, 0, chunk.length, null)
        .catch((err: unknown) => Promise.reject(cannot(err)));
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) {
        throw new SpecFileError(
          `${path}: the file is more than ${formatBytes(maxBytes)} bytes, over the limit for a job file`,
        );
      }
    }
    return Buffer.concat(chunks).toString('utf8');
  } finally {
    await handle.close();
  }
}

export function parseSpecText(text: string, path: string): JobSpec {
  refuseDeepNesting(text, path);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    const first = doc.errors[0];
    const at = first ? lineCounter.linePos(first.pos[0]) : undefined;
    throw new SpecFileError(
      `${path}${at ? `:${at.line}:${at.col}` : ''}: not valid YAML: ${first?.message ?? ''}`,
    );
  }
  const parsed = JobSpecSchema.safeParse(toPlainData(doc, path));
  if (parsed.success) return parsed.data;
  const located = parsed.error.issues.map((issue) => {
    const { path: fieldPath, message } = describeIssue(issue);
    const offset = locate(
      doc,
      fieldPath.map((segment) => (typeof segment === 'number' ? segment : String(segment))),
    );
    const pos = offset === undefined ? undefined : lineCounter.linePos(offset);
    const where = pos ? `${path}:${pos.line}:${pos.col}` : path;
    const field = formatPath(fieldPath);
    return { line: pos?.line ?? 0, text: `${where}: ${field ? `${field}: ` : ''}${message}` };
  });
  // In file order, as a compiler would list them.
  located.sort((a, b) => a.line - b.line);
  throw new SpecFileError(located.map((l) => l.text).join('\n'));
}

/**
 * Where a field is in the file: its key when it is a key of a mapping (an unknown key is pointed
 * at, not its value), else the deepest part of its path that exists (a missing field's parent).
 */
function locate(doc: Document, path: (string | number)[]): number | undefined {
  const parent = doc.getIn(path.slice(0, -1), true);
  const last = path.at(-1);
  if (isMap(parent) && last !== undefined) {
    const pair = parent.items.find((item) => isScalar(item.key) && String(item.key.value) === String(last));
    if (isScalar(pair?.key) && pair.key.range) return pair.key.range[0];
  }
  for (let depth = path.length; depth >= 0; depth--) {
    const node = doc.getIn(path.slice(0, depth), true);
    if (isNode(node) && node.range) return node.range[0];
  }
  return undefined;
}

/**
 * Runs the library's own iterative parser token by token and stops as soon as its stack of open
 * collections passes the limit, so a deep file costs a few tokens, not a crash.
 */
function refuseDeepNesting(text: string, path: string): void {
  const parser = new Parser();
  for (const lexeme of new Lexer().lex(text)) {
    for (const _token of parser.next(lexeme)) {
      // Finished documents are not needed here: only the depth is.
    }
    // The stack holds the document, then one entry per open collection (or scalar being read).
    if (parser.stack.length - 1 > SPEC_FILE_MAX_DEPTH) {
      throw new SpecFileError(
        `${path}: nested deeper than ${SPEC_FILE_MAX_DEPTH} levels, the limit for a job file`,
      );
    }
  }
}

function toPlainData(doc: Document, path: string): unknown {
  try {
    return doc.toJS({ maxAliasCount: SPEC_FILE_MAX_ALIAS_COUNT });
  } catch (err) {
    // The library refuses an alias expansion past maxAliasCount with a ReferenceError.
    if (err instanceof ReferenceError && /alias/i.test(err.message)) {
      throw new SpecFileError(
        `${path}: its YAML aliases expand past ${SPEC_FILE_MAX_ALIAS_COUNT} nodes, the limit for a job file (${err.message})`,
      );
    }
    throw new SpecFileError(`${path}: cannot read the YAML: ${(err as Error).message}`);
  }
}
