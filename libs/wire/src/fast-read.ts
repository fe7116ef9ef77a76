/**
 * The readers the fast decoders (fast-step.ts, fast-messages.ts) are built of: each returns what
 * the matching zod schema would give for a value it is sure of, and throws NOT_SURE otherwise, so
 * that the caller leaves the whole message to the schema. Conservative on purpose: a reader may
 * hand the schema a value it would accept (the schema then decides, and words any refusal), but
 * never accepts what the schema refuses. fast-step.test.ts holds each decoder to its schema.
 */

export type Json = Record<string, unknown>;

/** Thrown by a reader: the schema decides. One object, so a throw allocates nothing. */
export const NOT_SURE: unique symbol = Symbol('not sure');

export function notSure(): never {
  throw NOT_SURE;
}

/** A JSON object (not null, not an array) with no `__proto__` of its own, which a copy would turn into a prototype. */
export function isObject(value: unknown): value is Json {
  return (
    typeof value === 'object' && value !== null && !Array.isArray(value) && !Object.hasOwn(value, '__proto__')
  );
}

/** The value of `key`, undefined when absent; a key present with undefined (not JSON) is left to the schema. */
function field(o: Json, key: string): unknown {
  const value = o[key];
  if (value === undefined && Object.hasOwn(o, key)) notSure();
  return value;
}

/** Sets `key` only when the value is defined: zod leaves an absent optional key out of its output. */
export function put(out: Json, key: string, value: unknown): void {
  if (value !== undefined) out[key] = value;
}

export interface StringRule {
  min?: number;
  max?: number;
  noNul?: boolean;
  pattern?: RegExp;
}

function checkString(value: unknown, rule: StringRule): string {
  if (typeof value !== 'string') return notSure();
  if (rule.min !== undefined && value.length < rule.min) notSure();
  if (rule.max !== undefined && value.length > rule.max) notSure();
  if (rule.noNul && value.includes('\0')) notSure();
  if (rule.pattern && !rule.pattern.test(value)) notSure();
  return value;
}

export function str(o: Json, key: string, rule: StringRule = {}): string {
  return checkString(field(o, key), rule);
}

export function optStr(o: Json, key: string, rule: StringRule = {}): string | undefined {
  const value = field(o, key);
  return value === undefined ? undefined : checkString(value, rule);
}

/** `.nullish()`: absent stays absent, null stays null. */
export function nullishStr(o: Json, key: string, rule: StringRule = {}): string | null | undefined {
  const value = field(o, key);
  return value === undefined || value === null ? value : checkString(value, rule);
}

export function bool(o: Json, key: string): boolean {
  const value = field(o, key);
  return typeof value === 'boolean' ? value : notSure();
}

export function optBool(o: Json, key: string, fallback?: boolean): boolean | undefined {
  const value = field(o, key);
  if (value === undefined) return fallback;
  return typeof value === 'boolean' ? value : notSure();
}

export interface NumberRule {
  int?: boolean;
  min?: number;
  max?: number;
  /** Greater than 0 (`.positive()`). */
  positive?: boolean;
}

function checkNumber(value: unknown, rule: NumberRule): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) return notSure();
  if (rule.int && !Number.isSafeInteger(value)) notSure();
  if (rule.positive && !(value > 0)) notSure();
  if (rule.min !== undefined && value < rule.min) notSure();
  if (rule.max !== undefined && value > rule.max) notSure();
  return value;
}

export function num(o: Json, key: string, rule: NumberRule = {}): number {
  return checkNumber(field(o, key), rule);
}

export function optNum(o: Json, key: string, rule: NumberRule = {}, fallback?: number): number | undefined {
  const value = field(o, key);
  return value === undefined ? fallback : checkNumber(value, rule);
}

export function nullishNum(o: Json, key: string, rule: NumberRule = {}): number | null | undefined {
  const value = field(o, key);
  return value === undefined || value === null ? value : checkNumber(value, rule);
}

export function oneOf<T extends string>(
  o: Json,
  key: string,
  options: readonly T[],
  fallback?: T,
): T | undefined {
  const value = field(o, key);
  if (value === undefined) return fallback;
  return options.includes(value as T) ? (value as T) : notSure();
}

export function optObject(o: Json, key: string): Json | undefined {
  const value = field(o, key);
  if (value === undefined) return undefined;
  return isObject(value) ? value : notSure();
}

/** An array of strings, copied: `.array(string).min().max()`. */
export function checkStrings(value: unknown, rule: StringRule, min: number, max: number): string[] {
  if (!Array.isArray(value) || value.length < min || value.length > max) return notSure();
  return value.map((item: unknown) => checkString(item, rule));
}

/** A record of strings to strings, copied. */
export function checkStringRecord(
  value: unknown,
  keyRule: StringRule,
  valueRule: StringRule,
): Record<string, string> {
  if (!isObject(value)) return notSure();
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value))
    out[checkString(key, keyRule)] = checkString(item, valueRule);
  return out;
}

/** Runs a decoder: its value, or undefined when a reader was not sure. */
export function attempt<T>(decode: () => T): T | undefined {
  try {
    return decode();
  } catch (err) {
    if (err === NOT_SURE) return undefined;
    throw err;
  }
}
