import { StepIdSchema } from './step.js';

/**
 * How much of an oversized message is scanned for its stepId. Producers write `stepId` among the
 * first keys (the dispatcher's steps begin `{"schemaVersion":1,"stepId":…`), so this is plenty,
 * and an attacker's 1 GB message costs no more than 64 KiB of scanning.
 */
export const STEP_ID_SCAN_CHARS = 64 * 1024;

/**
 * The top-level `"stepId"` of a raw JSON object, read from its first STEP_ID_SCAN_CHARS without
 * parsing the rest, for a message too large to parse: its answer then carries the id and the
 * dispatcher can match it. Strings are skipped whole and nesting is counted, so a `"stepId"`
 * inside an argument or a nested object is never taken for the step's own. Null when the id is
 * not found in that prefix or is not a valid step id.
 */
export function peekStepId(raw: string): string | null {
  const text = raw.slice(0, STEP_ID_SCAN_CHARS);
  let depth = 0;
  let i = skipSpace(text, 0);
  if (text[i] !== '{') return null;
  for (; i < text.length; i++) {
    const char = text[i];
    if (char === '{' || char === '[') depth++;
    else if (char === '}' || char === ']') depth--;
    else if (char === '"') {
      const end = stringEnd(text, i);
      if (end < 0) return null;
      if (depth === 1 && text.slice(i, end + 1) === '"stepId"') {
        const colon = skipSpace(text, end + 1);
        // `"stepId"` as a value (`["stepId", …]`) has no colon after it: not the key.
        if (text[colon] === ':') return readIdValue(text, skipSpace(text, colon + 1));
      }
      i = end;
    }
  }
  return null;
}

function readIdValue(text: string, start: number): string | null {
  if (text[start] !== '"') return null;
  const end = stringEnd(text, start);
  if (end < 0) return null;
  let value: unknown;
  try {
    value = JSON.parse(text.slice(start, end + 1));
  } catch {
    return null;
  }
  const id = StepIdSchema.safeParse(value);
  return id.success ? id.data : null;
}

/** Index of the quote closing the JSON string that opens at `start`, or -1 past the text. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i;
  }
  return -1;
}

function skipSpace(text: string, from: number): number {
  let i = from;
  while (i < text.length && /\s/.test(text.charAt(i))) i++;
  return i;
}
