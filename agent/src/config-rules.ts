/**
 * The readers of the agent's configuration values (config.ts), written by hand rather than as a
 * zod schema: the agent's start-up heap then holds no schema (~190 zod objects for this one
 * parse; docs/benchmarks.md, "Idle agent memory, part 3"). Each refusal names the flag and the
 * rule it broke, as the schema's messages did; config.test.ts holds them.
 */

/** A raw value: a flag's string (or true for a boolean flag), an environment value, or absent. */
export type Raw = string | boolean | undefined;

/** Collects the refusals of one parse, each as `--flag: message`. */
export class Problems {
  readonly list: string[] = [];

  add(flag: string, message: string): undefined {
    this.list.push(`--${flag}: ${message}`);
    return undefined;
  }
}

const TRUE_WORDS = ['1', 'true', 'yes', 'on'];
const FALSE_WORDS = ['0', 'false', 'no', 'off', ''];

/** `--verbose`, or `AGENT_VERBOSE=1|true|yes|on|0|false|no|off`. */
export function readBoolean(raw: Raw, flag: string, problems: Problems): boolean {
  if (raw === undefined) return false;
  if (typeof raw === 'boolean') return raw;
  if (TRUE_WORDS.includes(raw)) return true;
  if (FALSE_WORDS.includes(raw)) return false;
  problems.add(flag, `--${flag} must be one of ${[...TRUE_WORDS, ...FALSE_WORDS.slice(0, -1)].join(', ')}`);
  return false;
}

function readNumber(raw: string, flag: string, problems: Problems): number | undefined {
  const text = raw.trim();
  if (text === '') return problems.add(flag, `--${flag} must not be empty`);
  const n = Number(text);
  if (!Number.isFinite(n)) return problems.add(flag, `--${flag} must be a number, got "${text}"`);
  return n;
}

/** A number within [min, max], or `fallback` when absent; `whole`: an integer too. */
export function readNumberIn(
  raw: Raw,
  flag: string,
  range: { min: number; max: number; whole?: boolean },
  fallback: number,
  problems: Problems,
): number {
  if (raw === undefined) return fallback;
  const n = readNumber(String(raw), flag, problems);
  if (n === undefined) return fallback;
  const before = problems.list.length;
  if (range.whole && !Number.isSafeInteger(n)) problems.add(flag, `--${flag} must be a whole number`);
  if (n < range.min) problems.add(flag, `--${flag} must be at least ${range.min}`);
  if (n > range.max) problems.add(flag, `--${flag} must be at most ${range.max}`);
  return problems.list.length === before ? n : fallback;
}

/** A whole number within [min, max], or `fallback` when absent. */
export function readInt(
  raw: Raw,
  flag: string,
  min: number,
  max: number,
  fallback: number,
  p: Problems,
): number {
  return readNumberIn(raw, flag, { min, max, whole: true }, fallback, p);
}

/** A string of 1 to `max` characters, or undefined when absent. */
export function readString(raw: Raw, flag: string, max: number, problems: Problems): string | undefined {
  if (raw === undefined) return undefined;
  const text = String(raw);
  if (text.length < 1) return problems.add(flag, `--${flag} must not be empty`);
  if (text.length > max) return problems.add(flag, `--${flag} is at most ${max} characters`);
  return text;
}
