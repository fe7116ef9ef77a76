import { parseArgs } from 'node:util';
import { nearestKey } from '@sandstream/wire';

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Every flag of every command; which command takes which is COMMAND_FLAGS. */
const FLAGS = {
  'redis-url': { type: 'string' },
  namespace: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  follow: { type: 'boolean', short: 'f' },
  json: { type: 'boolean' },
  tenant: { type: 'string' },
  state: { type: 'string' },
  limit: { type: 'string' },
} as const;
type Flag = keyof typeof FLAGS;

const GLOBAL_FLAGS: readonly Flag[] = ['redis-url', 'namespace', 'help'];

/**
 * Each command's own flags. A flag another command takes is refused too ("--json does not apply
 * to submit"): parseArgs would otherwise accept it and the command would silently ignore it.
 */
const COMMAND_FLAGS = {
  submit: ['follow'],
  logs: ['follow'],
  status: ['json'],
  cancel: [],
  ls: ['tenant', 'state', 'limit'],
} as const satisfies Record<string, readonly Flag[]>;

export type Command = keyof typeof COMMAND_FLAGS;

export interface ParsedCommandLine {
  command: Command | undefined;
  args: string[];
  values: ReturnType<
    typeof parseArgs<{ args: string[]; options: typeof FLAGS; allowPositionals: true }>
  >['values'];
}

function isCommand(name: string | undefined): name is Command {
  return name !== undefined && Object.hasOwn(COMMAND_FLAGS, name);
}

/**
 * Parses `sandstream <command> [args] [flags]`. Unknown flags are refused with the nearest valid
 * one (`--namespce` → did you mean --namespace?), flags of another command are refused by name,
 * and so are extra arguments: a mistyped flag must not be ignored while the command goes on.
 */
export function parseCommandLine(argv: string[]): ParsedCommandLine {
  // First pass, lenient, only to find the command and to name any unknown flag ourselves
  // (parseArgs' own message suggests nothing and talks about positionals).
  const { tokens } = parseArgs({
    args: argv,
    options: FLAGS,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const command = tokens.find((t) => t.kind === 'positional')?.value;
  if (command !== undefined && !isCommand(command)) {
    const suggestion = nearestKey(command, Object.keys(COMMAND_FLAGS));
    throw new UsageError(`unknown command "${command}"${suggestion ? ` (did you mean ${suggestion}?)` : ''}`);
  }
  const allowed: readonly string[] = isCommand(command)
    ? [...GLOBAL_FLAGS, ...COMMAND_FLAGS[command]]
    : Object.keys(FLAGS);
  for (const token of tokens) {
    if (token.kind !== 'option' || allowed.includes(token.name)) continue;
    if (Object.hasOwn(FLAGS, token.name))
      throw new UsageError(`${token.rawName} does not apply to ${command}`);
    // Single-letter flags are too short to guess from.
    const suggestion = token.rawName.startsWith('--') ? nearestKey(token.name, allowed) : undefined;
    throw new UsageError(
      `unknown flag ${token.rawName}${suggestion ? ` (did you mean --${suggestion}?)` : ''}`,
    );
  }
  // Second pass, strict, for the values and their types (a string flag missing its value).
  const { values, positionals } = parseArgs({ args: argv, options: FLAGS, allowPositionals: true });
  const [, ...args] = positionals;
  if (args.length > 1) throw new UsageError(`unexpected argument "${args[1]}"`);
  return { command: command as Command | undefined, args, values };
}
