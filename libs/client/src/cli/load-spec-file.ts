import { readFile } from 'node:fs/promises';
import { type JobSpec, JobSpecSchema } from '@sandstream/bus';
import { LineCounter, parseDocument } from 'yaml';

export class SpecFileError extends Error {
  override readonly name = 'SpecFileError';
}

/**
 * Reads a job file (YAML or JSON, which is YAML) and validates it with the one job spec schema.
 * Every error names the file and, where the field exists in the file, its line and column:
 * `job.yaml:7:14: steps.1.timeoutSeconds: timeoutSeconds must be positive`.
 */
export async function loadSpecFile(path: string): Promise<JobSpec> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new SpecFileError(`${path}: cannot read the file: ${(err as Error).message}`);
  }
  return parseSpecText(text, path);
}

export function parseSpecText(text: string, path: string): JobSpec {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    const first = doc.errors[0];
    const at = first ? lineCounter.linePos(first.pos[0]) : undefined;
    throw new SpecFileError(
      `${path}${at ? `:${at.line}:${at.col}` : ''}: not valid YAML: ${first?.message ?? ''}`,
    );
  }
  const parsed = JobSpecSchema.safeParse(doc.toJS());
  if (parsed.success) return parsed.data;
  const located = parsed.error.issues.map((issue) => {
    // Point at the deepest part of the path that exists in the file.
    let node: unknown;
    for (let depth = issue.path.length; depth >= 0 && !node; depth--) {
      node = doc.getIn(issue.path.slice(0, depth) as (string | number)[], true);
    }
    const range = (node as { range?: [number, number, number] } | undefined)?.range;
    const pos = range ? lineCounter.linePos(range[0]) : undefined;
    const where = pos ? `${path}:${pos.line}:${pos.col}` : path;
    const field = issue.path.map(String).join('.');
    return { line: pos?.line ?? 0, text: `${where}: ${field ? `${field}: ` : ''}${issue.message}` };
  });
  // In file order, as a compiler would list them.
  located.sort((a, b) => a.line - b.line);
  throw new SpecFileError(located.map((l) => l.text).join('\n'));
}
