import { parseArgs } from 'node:util';
import { nearestKey } from '@sandstream/wire';

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Every flag of every command; which command takes which is COMMAND_FLAGS. */
const FLAGS = {
  'redis-url': { type: 'string' },
  url: { type: 'string' },
  'api-key': { type: 'string' },
  'nats-url': { type: 'string' },
  namespace: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  follow: { type: 'boolean', short: 'f' },
  json: { type: 'boolean' },
  tenant: { type: 'string' },
  state: { type: 'string' },
  limit: { type: 'string' },
  template: { type: 'string' },
  image: { type: 'string' },
  id: { type: 'string' },
  env: { type: 'string', multiple: true },
  label: { type: 'string', multiple: true },
  'idle-timeout': { type: 'string' },
  timeout: { type: 'string' },
  shell: { type: 'boolean' },
  cwd: { type: 'string' },
  interactive: { type: 'boolean', short: 'i' },
  session: { type: 'string' },
  admin: { type: 'boolean' },
  volume: { type: 'string', multiple: true },
  size: { type: 'string' },
  'from-snapshot': { type: 'string' },
  count: { type: 'string' },
  name: { type: 'string' },
  public: { type: 'boolean' },
  host: { type: 'boolean' },
  allow: { type: 'string', multiple: true },
  none: { type: 'boolean' },
  internet: { type: 'boolean' },
  kill: { type: 'string' },
  language: { type: 'string' },
  context: { type: 'string' },
  file: { type: 'string' },
} as const;
type Flag = keyof typeof FLAGS;

/** Connection flags every command takes, like the variables the services read. */
const GLOBAL_FLAGS: readonly Flag[] = ['redis-url', 'url', 'api-key', 'nats-url', 'namespace', 'help'];

/**
 * Each command's own flags. A flag another command takes is refused too ("--json does not apply
 * to submit"): parseArgs would otherwise accept it and the command would silently ignore it.
 */
const COMMAND_FLAGS = {
  submit: ['follow'],
  logs: ['follow'],
  status: ['json'],
  cancel: [],
  ls: ['tenant', 'state', 'limit', 'json'],
  'sandbox create': [
    'template',
    'id',
    'env',
    'label',
    'idle-timeout',
    'timeout',
    'tenant',
    'volume',
    'from-snapshot',
  ],
  'sandbox restore': [],
  'sandbox fork': ['count'],
  'snapshot create': ['name'],
  'snapshot ls': ['json'],
  'snapshot rm': [],
  'sandbox ls': ['tenant', 'state', 'label', 'limit', 'json'],
  'sandbox inspect': ['json'],
  'sandbox rm': [],
  'sandbox pause': [],
  'sandbox resume': ['timeout'],
  'sandbox url': ['public', 'host'],
  'sandbox set-timeout': [],
  'sandbox network': ['allow', 'none', 'internet'],
  'sandbox stats': ['json'],
  'sandbox history': ['json'],
  'sandbox keepalive': [],
  ps: ['kill', 'json'],
  exec: ['shell', 'cwd', 'env', 'timeout', 'interactive'],
  shell: ['session'],
  'run-code': ['language', 'context', 'timeout'],
  cp: [],
  'apikey create': ['tenant', 'admin'],
  'apikey ls': ['json'],
  'apikey revoke': [],
  'volume create': ['size', 'tenant'],
  'volume ls': ['tenant', 'json'],
  'volume rm': ['tenant'],
  mcp: ['image', 'template'],
  'template build': ['file'],
  'template ls': ['json'],
  'template rm': [],
} as const satisfies Record<string, readonly Flag[]>;

export type Command = keyof typeof COMMAND_FLAGS;

/** Commands with subcommands: `sandbox create`, `sandbox ls` … (the first word alone is not one). */
const GROUPS = ['sandbox', 'apikey', 'volume', 'snapshot', 'template'] as const;

/** Commands that take a command line of their own after `--`. */
const TAKES_COMMAND_LINE: readonly Command[] = ['exec', 'run-code'];

export interface ParsedCommandLine {
  command: Command | undefined;
  args: string[];
  /** What came after `--` (exec's command and its arguments). */
  commandLine: string[];
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
export function parseCommandLine(given: string[]): ParsedCommandLine {
  // `template build -f <Dockerfile>` as docker build spells it, while every other command's -f
  // is --follow: the one command's -f is its --file before parsing.
  const building = given[0] === 'template' && given[1] === 'build';
  const argv = building ? given.map((a) => (a === '-f' ? '--file' : a)) : given;
  // First pass, lenient, only to find the command and to name any unknown flag ourselves
  // (parseArgs' own message suggests nothing and talks about positionals).
  const { tokens } = parseArgs({
    args: argv,
    options: FLAGS,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  const terminator = tokens.findIndex((t) => t.kind === 'option-terminator');
  const before = terminator === -1 ? tokens : tokens.slice(0, terminator);
  const words = before.filter((t) => t.kind === 'positional').map((t) => t.value);
  const group = GROUPS.find((g) => g === words[0]);
  const command = group ? (words[1] === undefined ? group : `${group} ${words[1]}`) : words[0];
  if (group && words[1] === undefined) {
    const subcommands = Object.keys(COMMAND_FLAGS).filter((c) => c.startsWith(`${group} `));
    throw new UsageError(
      `${group} needs a subcommand: ${subcommands.map((c) => c.slice(group.length + 1)).join(', ')}`,
    );
  }
  if (command !== undefined && !isCommand(command)) {
    const suggestion = nearestKey(command, Object.keys(COMMAND_FLAGS));
    throw new UsageError(`unknown command "${command}"${suggestion ? ` (did you mean ${suggestion}?)` : ''}`);
  }
  const takesCommandLine = isCommand(command) && TAKES_COMMAND_LINE.includes(command);
  if (terminator !== -1 && !takesCommandLine) {
    throw new UsageError(`${command ?? 'sandstream'} takes no command line after --`);
  }
  const allowed: readonly string[] = isCommand(command)
    ? [...GLOBAL_FLAGS, ...COMMAND_FLAGS[command]]
    : Object.keys(FLAGS);
  for (const token of before) {
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
  const ownArgs = terminator === -1 ? argv : argv.slice(0, argv.indexOf('--'));
  const commandLine = terminator === -1 ? [] : argv.slice(argv.indexOf('--') + 1);
  const { values, positionals } = parseArgs({ args: ownArgs, options: FLAGS, allowPositionals: true });
  const args = positionals.slice(group ? 2 : 1);
  const most =
    command === 'cp' ||
    command === 'sandbox url' ||
    command === 'sandbox set-timeout' ||
    command === 'template build'
      ? 2
      : 1;
  if (args.length > most) throw new UsageError(`unexpected argument "${args[most]}"`);
  if (takesCommandLine && commandLine.length === 0) {
    throw new UsageError(`${command} needs a command after --, e.g. sandstream ${command} <id> -- ls -la`);
  }
  return { command: command as Command | undefined, args, commandLine, values };
}
