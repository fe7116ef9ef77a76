import * as z from 'zod';
import { editDistance } from './edit-distance.js';

/**
 * Unknown keys where people type input: job files, SDK specs, the templates file. A typo there
 * used to be dropped silently ("contineOnError" let a failing step end the job), so the objects
 * at those edges are strict, and every refusal names the key and the nearest valid one. The wire
 * itself stays lenient (readers ignore unknown optional fields, docs/wire.md): its schemas are
 * plain z.object, and only the schemas built for the edges go through strictObject below.
 */

/** Advice for keys that are not typos but belong somewhere else, e.g. `secretEnv` in a job. */
export type KeyHints = Readonly<Record<string, string>>;

/** The known key a mistyped one most likely meant, or undefined when none is close enough. */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  const typed = key.toLowerCase();
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    const d = editDistance(typed, candidate.toLowerCase());
    if (best === undefined || d < best.distance) best = { key: candidate, distance: d };
  }
  // A typo is a few edits away, and fewer edits than the key has letters ("ab" is not "id").
  if (best && best.distance <= Math.max(2, Math.floor(key.length / 3)) && best.distance < key.length) {
    return best.key;
  }
  // A shortening ("workdir" for workingDirectory, "timeout" for timeoutSeconds) is many edits
  // away but keeps the letters in order; the shortest such key is the likeliest.
  return known
    .filter((candidate) => isShortening(typed, candidate.toLowerCase()))
    .sort((a, b) => a.length - b.length)[0];
}

function isShortening(short: string, long: string): boolean {
  if (short.length < 3 || short.length >= long.length || short[0] !== long[0]) return false;
  let matched = 0;
  for (const char of long) {
    if (char === short[matched]) matched++;
    if (matched === short.length) return true;
  }
  return false;
}

function suggestion(key: string, known: readonly string[], hints: KeyHints): string {
  const hint = Object.hasOwn(hints, key) ? hints[key] : undefined;
  if (hint !== undefined) return ` (${hint})`;
  const near = nearestKey(key, known);
  return near === undefined ? '' : ` (did you mean ${JSON.stringify(near)}?)`;
}

/** `unknown key "contineOnError" (did you mean "continueOnError"?)`, or the same for several keys. */
export function describeUnknownKeys(
  keys: readonly string[],
  known: readonly string[],
  hints: KeyHints = {},
): string {
  const each = keys.map((key) => `${JSON.stringify(key)}${suggestion(key, known, hints)}`);
  return `unknown key${keys.length === 1 ? '' : 's'} ${each.join(', ')}`;
}

/**
 * The error map of a strict object: it words zod's `unrecognized_keys` issue against the keys of
 * the object that raised it (read from the issue, so a schema made by .extend()/.omit() suggests
 * its own keys) and leaves every other issue to zod.
 */
export function unknownKeysError(hints: KeyHints = {}): z.core.$ZodErrorMap {
  return (issue) => {
    if (issue.code !== 'unrecognized_keys') return undefined;
    const known = issue.inst instanceof z.ZodObject ? Object.keys(issue.inst.shape) : [];
    return describeUnknownKeys(issue.keys, known, hints);
  };
}

/** z.strictObject whose unknown keys are refused by name, with the nearest valid key suggested. */
export function strictObject<Shape extends z.core.$ZodLooseShape>(shape: Shape, hints?: KeyHints) {
  return z.strictObject(shape, { error: unknownKeysError(hints) });
}
