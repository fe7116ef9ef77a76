import { createInterface } from 'node:readline';
import type { LiveSandboxSpecInput, SandboxRecord } from '@sandstream/bus';
import { Limits, overLimit } from '@sandstream/wire';
import type { SandstreamClient } from '../client.js';
import type { ExecResult } from '../command-output.js';
import type { Sandbox } from '../sandbox.js';
import { CommandCancelledError, SandboxClosedError, SandboxNotFoundError } from '../sandbox-errors.js';
import { ExitCodes, exitCodeForCommand } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';
import { describeGap } from './render.js';
import { volumeMounts } from './volume-commands.js';

// `sandstream sandbox create|ls|inspect|rm` and `sandstream exec`: live sandboxes from the shell.
// Their forms are contracts (scripts capture `ID=$(sandstream sandbox create …)`).

type Values = ParsedCommandLine['values'];

/** `K=V` pairs of a repeated flag, each checked. */
export function keyValues(flag: string, entries: readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of entries ?? []) {
    const at = entry.indexOf('=');
    if (at <= 0) throw new UsageError(`--${flag} takes KEY=VALUE (got "${entry}")`);
    out[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return out;
}

/** A number of seconds given to a flag, checked (the spec then applies its own limits). */
export function seconds(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new UsageError(`--${flag} takes a number of seconds > 0 (got "${value}")`);
  return n;
}

/** The spec `sandbox create` asks for; parsed (and refused by field) by the SDK. */
export function createSpec(image: string | undefined, values: Values): LiveSandboxSpecInput {
  if (!image && !values.template && !values['from-snapshot'])
    throw new UsageError('sandbox create needs an image, --template <name> or --from-snapshot <snapshotId>');
  const idle = seconds('idle-timeout', values['idle-timeout']);
  const timeout = seconds('timeout', values.timeout);
  return {
    ...(image ? { image } : {}),
    ...(values.template ? { template: values.template } : {}),
    ...(values['from-snapshot'] ? { fromSnapshot: values['from-snapshot'] } : {}),
    ...(values.id ? { id: values.id } : {}),
    ...(values.tenant ? { tenant: values.tenant } : {}),
    env: keyValues('env', values.env),
    labels: keyValues('label', values.label),
    ...(values.volume ? { volumes: volumeMounts(values.volume) } : {}),
    ...(idle !== undefined ? { idleTimeoutSeconds: idle } : {}),
    ...(timeout !== undefined ? { timeoutSeconds: timeout } : {}),
  };
}

export async function createSandbox(
  client: SandstreamClient,
  image: string | undefined,
  values: Values,
): Promise<number> {
  const sandbox = await client.sandboxes.create(createSpec(image, values));
  // The id alone on stdout: ID=$(sandstream sandbox create …) works.
  process.stdout.write(`${sandbox.id}\n`);
  return ExitCodes.succeeded;
}

export function formatSandboxRow(s: SandboxRecord): string {
  const state = s.reason ? `${s.state} (${s.reason})` : s.state;
  const image = s.spec.image ?? `template ${s.spec.template}`;
  return `${s.id.padEnd(40)} ${s.tenant.padEnd(12)} ${state.padEnd(20)} ${image}`;
}

export async function listSandboxes(client: SandstreamClient, values: Values): Promise<number> {
  const limit = values.limit === undefined ? 50 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit is 1..1000');
  const records = await client.sandboxes.list({
    ...(values.state ? { state: values.state as SandboxRecord['state'] } : {}),
    ...(values.tenant ? { tenant: values.tenant } : {}),
    labels: keyValues('label', values.label),
    limit,
  });
  if (values.json) process.stdout.write(`${JSON.stringify(records, null, 2)}\n`);
  else {
    process.stdout.write(`${'ID'.padEnd(40)} ${'TENANT'.padEnd(12)} ${'STATE'.padEnd(20)} IMAGE\n`);
    for (const r of records) process.stdout.write(`${formatSandboxRow(r)}\n`);
  }
  return ExitCodes.succeeded;
}

export async function inspectSandbox(client: SandstreamClient, id: string, values: Values): Promise<number> {
  const record = await client.sandboxes.get(id);
  if (!record) throw new SandboxNotFoundError(id);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(record, null, 2)}\n`);
    return ExitCodes.succeeded;
  }
  const time = (ms: number | undefined) => (ms === undefined ? '-' : new Date(ms).toISOString());
  const lines = [
    `sandbox   ${record.id}`,
    `tenant    ${record.tenant}`,
    `state     ${record.state}${record.reason ? ` (${record.reason})` : ''}`,
    ...(record.message ? [`message   ${record.message}`] : []),
    `image     ${record.spec.image ?? '-'}${record.spec.template ? `  template ${record.spec.template}` : ''}`,
    `labels    ${
      Object.entries(record.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ') || '-'
    }`,
    `created   ${time(record.createdAt)}`,
    `ready     ${time(record.readyAt)}`,
    `activity  ${time(record.lastActivityAt)}  (${record.commandsRunning} running)`,
    `limits    idle ${record.spec.idleTimeoutSeconds} s, lifetime ${record.spec.timeoutSeconds} s`,
    ...(record.pausedAt
      ? [`paused    ${time(record.pausedAt)}  (resume: sandstream sandbox resume ${record.id})`]
      : []),
    ...(record.resumes > 0 ? [`resumed   ${record.resumes} time(s)`] : []),
    ...(record.endedAt ? [`ended     ${time(record.endedAt)}`] : []),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  return ExitCodes.succeeded;
}

export async function pauseSandbox(client: SandstreamClient, id: string): Promise<number> {
  const { sandbox, stoppedCommands } = await client.sandboxes.handle(id).pause();
  const stopped = stoppedCommands.length > 0 ? ` (stopped: ${stoppedCommands.join(' ')})` : '';
  process.stdout.write(`${id} ${sandbox.state}${stopped}\n`);
  return ExitCodes.succeeded;
}

export async function resumeSandbox(client: SandstreamClient, id: string, values: Values): Promise<number> {
  const timeout = seconds('timeout', values.timeout);
  await client.sandboxes.resume(id, timeout !== undefined ? { timeoutSeconds: timeout } : {});
  // The id alone, as create prints it: ID=$(sandstream sandbox resume "$ID") works.
  process.stdout.write(`${id}\n`);
  return ExitCodes.succeeded;
}

export async function removeSandbox(client: SandstreamClient, id: string): Promise<number> {
  // Closes it whatever its state: a sandbox still queued or being created is not waited for.
  const closed = await client.sandboxes.close(id);
  process.stdout.write(`${id} ${closed.state}${closed.reason ? ` (${closed.reason})` : ''}\n`);
  return ExitCodes.succeeded;
}

/**
 * `exec`: live output on stdout/stderr, the command's own exit code; 124 when it timed out, 130
 * when cancelled (Ctrl-C here kills it in the sandbox), 125 when Sandstream itself failed.
 */
export async function execInSandbox(
  client: SandstreamClient,
  id: string,
  commandLine: string[],
  values: Values,
  how: {
    /**
     * Push the command at once (over Redis: the push script itself refuses a sandbox that is not
     * ready, in the same round trip), and wait for readiness as `connect` does only when refused.
     * A ready sandbox, the usual case, costs one round trip and no record read before its command.
     */
    pushFirst?: boolean;
  } = {},
): Promise<number> {
  const timeout = seconds('timeout', values.timeout);
  // -i: what this process reads on stdin goes to the command's stdin (read whole, bounded).
  const stdin = values.interactive ? await readStdin(Limits.runStdinMaxBytes) : undefined;
  const controller = new AbortController();
  const onInterrupt = () => controller.abort();
  process.once('SIGINT', onInterrupt);
  const run = (sandbox: Sandbox) =>
    sandbox.exec(values.shell ? commandLine.join(' ') : commandLine, {
      shell: values.shell === true,
      ...(values.cwd ? { cwd: values.cwd } : {}),
      env: keyValues('env', values.env),
      ...(timeout !== undefined ? { timeoutSeconds: timeout } : {}),
      ...(stdin ? { stdin } : {}),
      signal: controller.signal,
      onStdout: (line) => process.stdout.write(`${line}\n`),
      onStderr: (line) => process.stderr.write(`${line}\n`),
      onGap: (gap) => process.stderr.write(`sandstream: ${describeGap(gap)}\n`),
    });
  try {
    let result: ExecResult;
    if (how.pushFirst) {
      try {
        result = await run(client.sandboxes.handle(id));
      } catch (err) {
        // Not ready (queued, creating), paused, closing: what `connect` does with it, as before
        // (wait for ready, or its own error), then the command.
        if (!(err instanceof SandboxClosedError)) throw err;
        result = await run(await client.sandboxes.connect(id));
      }
    } else result = await run(await client.sandboxes.connect(id));
    if (result.exitCode === null && !result.timedOut && !result.cancelled) {
      process.stderr.write(`sandstream: ${result.errorMessage ?? 'the command did not run'}\n`);
    }
    return exitCodeForCommand(result);
  } catch (err) {
    if (err instanceof CommandCancelledError) return ExitCodes.cancelled;
    throw err;
  } finally {
    process.removeListener('SIGINT', onInterrupt);
  }
}

/** All of this process's stdin, refused with a usage error past `limit` bytes. */
async function readStdin(limit: number): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new UsageError(overLimit('exec -i: stdin', size, limit));
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * `shell <id>`. On a terminal (stdin and stdout both): an interactive terminal in the sandbox, a
 * PTY running its shell, with the local terminal in raw mode, so line editing, colours,
 * full-screen programs, window resizes and Ctrl-C (reaching the foreground command there) work
 * as over ssh; the exit code is the shell's. Otherwise, or with `--session`: a long-lived shell
 * session of the sandbox, one command line at a time from stdin (`printf 'cd /tmp\npwd\n' |
 * sandstream shell <id>` prints /tmp), output as it comes; an `exit` line or the end of stdin
 * ends it, and the exit code is the last command's.
 */
export async function shellInSandbox(client: SandstreamClient, id: string, values: Values): Promise<number> {
  const sandbox = await client.sandboxes.connect(id);
  if (process.stdin.isTTY === true && process.stdout.isTTY === true && values.session === undefined) {
    return interactiveTerminal(sandbox);
  }
  const session = sandbox.shell(values.session ?? 'default');
  const tty = process.stdin.isTTY === true;
  const lines = createInterface({
    input: process.stdin,
    terminal: tty,
    ...(tty ? { prompt: `${session.name}$ ` } : {}),
  });
  let last = 0;
  if (tty) lines.prompt();
  for await (const line of lines) {
    const command = line.trim();
    if (command === 'exit') break;
    if (command !== '') {
      const result = await session.run(command, {
        onStdout: (out) => process.stdout.write(`${out}\n`),
        onStderr: (err) => process.stderr.write(`${err}\n`),
      });
      if (result.errorMessage) process.stderr.write(`sandstream: ${result.errorMessage}\n`);
      last = exitCodeForCommand(result);
    }
    if (tty) lines.prompt();
  }
  lines.close();
  return last;
}

/** The local terminal joined to a PTY in the sandbox until the program there ends. */
async function interactiveTerminal(sandbox: Sandbox): Promise<number> {
  const stdin = process.stdin;
  const stdout = process.stdout;
  const terminal = await sandbox.terminals.open({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
  // Input and resizes go out one after another, in the order they happened.
  let sending: Promise<void> = Promise.resolve();
  let lost: Error | undefined;
  const send = (what: () => Promise<void>) => {
    sending = sending.then(what).catch((err: Error) => {
      lost ??= err;
    });
  };
  const onData = (chunk: Buffer) => send(() => terminal.write(chunk));
  const onResize = () => send(() => terminal.resize(stdout.columns || 80, stdout.rows || 24));
  stdin.setRawMode(true);
  stdin.on('data', onData);
  stdin.resume();
  stdout.on('resize', onResize);
  try {
    for await (const chunk of terminal.output()) stdout.write(chunk);
  } finally {
    stdout.off('resize', onResize);
    stdin.off('data', onData);
    stdin.setRawMode(false);
    stdin.pause();
  }
  const end = await terminal.wait();
  if (lost) process.stderr.write(`sandstream: input was lost: ${lost.message}\n`);
  if (end.errorMessage && !end.cancelled) process.stderr.write(`sandstream: ${end.errorMessage}\n`);
  return exitCodeForCommand(end);
}
