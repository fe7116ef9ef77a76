import type { CodeError, CodeResult } from '@sandstream/wire';
import {
  attempt,
  codeError,
  codeResult,
  isObject,
  type Json,
  notSure,
  nullishNum,
  num,
  oneOf,
  str,
} from '@sandstream/wire/lean';

/**
 * What a runner writes on fd 4, one JSON object a line (python-runner.ts, javascript-runner.ts).
 * Checked by hand rather than with zod, so that the agent's start-up heap holds no schema
 * (docs/benchmarks.md, "Idle agent memory, part 3"); runner-message.test.ts holds the rules.
 */
export type RunnerMessage =
  | { type: 'ready'; pid: number }
  | { type: 'stream'; id: number | null; name: 'stdout' | 'stderr'; text: string }
  | (CodeResult & { type: 'result'; id: number | null })
  | { type: 'done'; id: number | null; error: CodeError | null };

/** A cell's id: a whole number, or null for what belongs to no cell. */
function cellId(o: Json): number | null {
  if (!Object.hasOwn(o, 'id')) notSure();
  return nullishNum(o, 'id', { int: true }) as number | null;
}

function decode(json: unknown): RunnerMessage {
  if (!isObject(json)) return notSure();
  switch (json.type) {
    case 'ready':
      return { type: 'ready', pid: num(json, 'pid', { int: true }) };
    case 'stream':
      return {
        type: 'stream',
        id: cellId(json),
        name: oneOf(json, 'name', ['stdout', 'stderr']) ?? notSure(),
        text: str(json, 'text'),
      };
    case 'result':
      return { ...codeResult(json), type: 'result', id: cellId(json) };
    case 'done': {
      const error = json.error;
      return {
        type: 'done',
        id: cellId(json),
        error: error === null ? null : isObject(error) ? codeError(error) : notSure(),
      };
    }
    default:
      return notSure();
  }
}

/** The message on one line, or undefined for a line that is not one (not JSON, a broken rule). */
export function parseRunnerMessage(line: string): RunnerMessage | undefined {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return undefined;
  }
  return attempt(() => decode(json));
}
