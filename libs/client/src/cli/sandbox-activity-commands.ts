import type { SandstreamClient } from '../client.js';
import { SandboxCommandNotFoundError } from '../sandbox-errors.js';
import type { CommandHistoryEntry } from '../sandbox-history.js';
import { ExitCodes } from './exit-codes.js';
import type { ParsedCommandLine } from './flags.js';

// What a live sandbox runs and has run, from the shell: `ps`, `sandbox history`, `sandbox stats`,
// `sandbox keepalive` (the SDK's processes.list / kill, history(), stats(), keepAlive()). Tables
// have a header row; --json prints the SDK's objects as they are, for scripts.

type Values = ParsedCommandLine['values'];

const time = (ms: number) => new Date(ms).toISOString();

/** What a history entry ran, as one line: the command line, a file operation's path, a terminal. */
function commandLineOf(entry: CommandHistoryEntry): string {
  if (entry.command !== undefined) return [entry.command, ...(entry.args ?? [])].join(' ');
  if (entry.terminal !== undefined) return `terminal ${entry.terminal}`;
  return entry.path ?? '';
}

/** How it ended, or that it has not. */
function outcomeOf(entry: CommandHistoryEntry): string {
  const result = entry.result;
  if (!result) return 'running';
  if (result.timedOut) return 'timed out';
  if (result.cancelled) return 'cancelled';
  if (result.exitCode !== null) return `exit ${result.exitCode}`;
  return result.errorCode ?? 'failed';
}

function table(header: readonly string[], widths: readonly number[], rows: readonly string[][]): string {
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i < widths.length ? cell.padEnd(widths[i] as number) : cell))
      .join(' ')
      .trimEnd();
  return `${[header, ...rows].map(line).join('\n')}\n`;
}

/** `ps <id>`: its background processes still running; `--kill <processId>` kills one's tree. */
export async function processesCommand(
  client: SandstreamClient,
  id: string,
  values: Values,
): Promise<number> {
  const sandbox = await client.sandboxes.connect(id);
  const running = await sandbox.processes.list();
  if (values.kill !== undefined) {
    // Only a process it is running: an unknown or finished id is "not found" (exit 4), not a
    // kill request that nothing will answer.
    if (!running.some((p) => p.id === values.kill)) throw new SandboxCommandNotFoundError(id, values.kill);
    await sandbox.processes.kill(values.kill);
    process.stdout.write(`${values.kill} killed\n`);
    return ExitCodes.succeeded;
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(running, null, 2)}\n`);
    return ExitCodes.succeeded;
  }
  process.stdout.write(
    table(
      ['PROCESS', 'STARTED', 'COMMAND'],
      [36, 24],
      running.map((p) => [p.id, time(p.startedAt), commandLineOf(p)]),
    ),
  );
  return ExitCodes.succeeded;
}

/** `sandbox history <id>`: the commands in its bounded history, oldest first, and how they ended. */
export async function historyCommand(client: SandstreamClient, id: string, values: Values): Promise<number> {
  const entries = await (await client.sandboxes.connect(id)).history();
  if (values.json) {
    process.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
    return ExitCodes.succeeded;
  }
  process.stdout.write(
    table(
      ['COMMAND', 'KIND', 'STARTED', 'OUTCOME', 'WHAT'],
      [36, 10, 24, 12],
      entries.map((e) => [
        e.id,
        e.background ? `${e.kind}&` : e.kind,
        time(e.startedAt),
        outcomeOf(e),
        commandLineOf(e),
      ]),
    ),
  );
  return ExitCodes.succeeded;
}

/** `sandbox stats <id>`: CPU, memory, disk and workspace use, and its command counts. */
export async function statsCommand(client: SandstreamClient, id: string, values: Values): Promise<number> {
  const stats = await (await client.sandboxes.connect(id)).stats();
  if (values.json) {
    process.stdout.write(`${JSON.stringify(stats, null, 2)}\n`);
    return ExitCodes.succeeded;
  }
  const orDash = (n: number | null, unit = '') => (n === null ? '-' : `${n}${unit}`);
  const lines = [
    `cpu        ${stats.cpuSeconds === null ? '-' : `${stats.cpuSeconds.toFixed(2)} s`}`,
    `memory     ${orDash(stats.memoryBytes, ' B')} of ${orDash(stats.memoryLimitBytes, ' B')}`,
    `disk       ${orDash(stats.diskBytes, ' B')} of ${orDash(stats.diskLimitBytes, ' B')}`,
    `workspace  ${stats.workspaceBytes} B in ${stats.workspaceFiles} files${stats.workspaceTruncated ? ' (at least)' : ''}`,
    `commands   ${stats.commandsRun} run, ${stats.commandsRunning} running, ${stats.outputLines} output lines held`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  return ExitCodes.succeeded;
}

/** `sandbox keepalive <id>`: counts as a client call, so its idle expiry starts again. */
export async function keepAliveCommand(client: SandstreamClient, id: string): Promise<number> {
  await (await client.sandboxes.connect(id)).keepAlive();
  process.stdout.write(`${id} kept alive\n`);
  return ExitCodes.succeeded;
}
