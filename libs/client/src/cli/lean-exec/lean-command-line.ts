import { LEAN_LIMITS } from './lean-decode.js';

/**
 * The command lines the lean `exec` takes, and the step it pushes. Only the plain, valid forms:
 *
 *   exec [--shell] [--cwd <dir>] [--env K=V]… [--timeout <s>] [--redis-url <u>] [--namespace <n>]
 *        <id> -- <command> [args…]
 *
 * Anything else (another flag, -i, --url, a value the full CLI would refuse with a message, a NUL
 * byte, a limit reached) is undefined: the full CLI runs it, with its own parsing and messages,
 * before anything was sent anywhere. lean-exec.test.ts holds the step equal to what the full CLI
 * pushes (StepSchema's output) and the refusals to the full CLI's.
 */
export interface LeanExecLine {
  id: string;
  shell: boolean;
  cwd?: string;
  env: Record<string, string>;
  timeoutSeconds?: number;
  redisUrl?: string;
  namespace?: string;
  commandLine: string[];
}

const STRING_FLAGS = new Set(['cwd', 'env', 'timeout', 'redis-url', 'namespace']);
/** JobIdSchema's pattern: an id it refuses is the full CLI's to explain. */
const JOB_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export function parseLeanExecLine(argv: readonly string[]): LeanExecLine | undefined {
  if (argv[0] !== 'exec') return undefined;
  const end = argv.indexOf('--');
  if (end < 0) return undefined;
  const commandLine = argv.slice(end + 1);
  if (commandLine.length === 0) return undefined;
  const values: Record<string, string> = {};
  const env: Record<string, string> = {};
  let shell = false;
  let id: string | undefined;
  for (let i = 1; i < end; i++) {
    const word = argv[i] as string;
    if (!word.startsWith('-')) {
      if (id !== undefined) return undefined;
      id = word;
      continue;
    }
    if (word === '--shell') {
      shell = true;
      continue;
    }
    const eq = word.indexOf('=');
    const name = word.slice(2, eq < 0 ? undefined : eq);
    if (!word.startsWith('--') || !STRING_FLAGS.has(name)) return undefined;
    let value: string | undefined;
    if (eq >= 0) value = word.slice(eq + 1);
    else {
      value = argv[++i];
      // A value that looks like a flag, or none before `--`: parseArgs' own message.
      if (i >= end || value === undefined || value.startsWith('-')) return undefined;
    }
    if (name === 'env') {
      const at = value.indexOf('=');
      if (at <= 0) return undefined;
      env[value.slice(0, at)] = value.slice(at + 1);
    } else if (Object.hasOwn(values, name)) return undefined;
    else values[name] = value;
  }
  if (id === undefined || !JOB_ID.test(id)) return undefined;
  let timeoutSeconds: number | undefined;
  if (values.timeout !== undefined) {
    timeoutSeconds = Number(values.timeout);
    if (!Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) return undefined;
    if (timeoutSeconds > LEAN_LIMITS.runMaxTimeoutSeconds) return undefined;
  }
  if (values.cwd !== undefined && (values.cwd.length === 0 || values.cwd.length > 4096)) return undefined;
  const strings = [...commandLine, ...Object.keys(env), ...Object.values(env), values.cwd ?? ''];
  if (strings.some((s) => s.includes('\0'))) return undefined;
  return {
    id,
    shell,
    env,
    commandLine,
    ...(values.cwd !== undefined ? { cwd: values.cwd } : {}),
    ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
    ...(values['redis-url'] !== undefined ? { redisUrl: values['redis-url'] } : {}),
    ...(values.namespace !== undefined ? { namespace: values.namespace } : {}),
  };
}

/** The ID_SLOT the push script replaces with the command's id (libs/bus sandbox-commands.ts). */
const ID_SLOT = 'cmd-0';

export interface LeanPush {
  /** The step's JSON and its history record's, each cut around the id as the push script takes them. */
  stepHead: string;
  stepTail: string;
  recordHead: string;
  recordTail: string;
}

/** What SandboxCommands.push sends for this command line, or undefined where it would refuse it. */
export function leanPushOf(line: LeanExecLine, now: number): LeanPush | undefined {
  const [command, ...args] = line.shell ? [line.commandLine.join(' ')] : line.commandLine;
  if (command === undefined || command.length === 0 || command.length > 64 * 1024) return undefined;
  if (args.length > LEAN_LIMITS.runMaxArgs) return undefined;
  // StepSchema's output for a run step, in its key order (defaults filled in).
  const step = {
    schemaVersion: LEAN_LIMITS.schemaVersion,
    stepId: ID_SLOT,
    kind: 'run',
    parallel: true,
    command,
    args,
    shell: line.shell,
    workingDirectory: line.cwd ?? null,
    env: line.env,
    timeoutSeconds: line.timeoutSeconds ?? LEAN_LIMITS.runDefaultTimeoutSeconds,
  };
  const stepJson = JSON.stringify(step);
  if (Buffer.byteLength(stepJson, 'utf8') + 20 > LEAN_LIMITS.messageMaxBytes) return undefined;
  const record = {
    id: ID_SLOT,
    kind: 'run',
    startedAt: now,
    command,
    args,
    ...(line.shell ? { shell: true } : {}),
  };
  const [stepHead, stepTail] = cutAroundId(stepJson, '"stepId":');
  const [recordHead, recordTail] = cutAroundId(JSON.stringify(record), '"id":');
  return { stepHead, stepTail, recordHead, recordTail };
}

function cutAroundId(json: string, key: string): [string, string] {
  const at = json.indexOf(`${key}"${ID_SLOT}"`);
  const head = json.slice(0, at + key.length + 1);
  return [head, json.slice(head.length + ID_SLOT.length)];
}

/** encodeCancel(commandId, reason): the control message a cancel pushes. */
export function leanCancelOf(commandId: string, reason: string): string {
  return JSON.stringify({
    schemaVersion: LEAN_LIMITS.schemaVersion,
    kind: 'cancel',
    stepId: commandId,
    reason: reason.slice(0, 1024),
  });
}
