import { CodeLanguageSchema } from '@sandstream/wire';
import type { SandstreamClient } from '../client.js';
import { mainResultText } from '../code-execution.js';
import { CommandCancelledError, SandboxCodeError } from '../sandbox-errors.js';
import { ExitCodes } from './exit-codes.js';
import { type ParsedCommandLine, UsageError } from './flags.js';
import { seconds } from './sandbox-commands.js';

type Values = ParsedCommandLine['values'];

/**
 * `sandstream run-code <id> [--language <l>] [--context <c>] [--timeout <s>] -- <code>`: one
 * cell for the code interpreter. Prints its output as it comes, then the main result's text;
 * exits 1 when the cell raised (its traceback on stderr), 124 when it timed out (interrupted, the
 * context kept), 130 on Ctrl-C (likewise), 125 when the interpreter could not run it at all.
 */
export async function runCodeInSandbox(
  client: SandstreamClient,
  id: string,
  commandLine: string[],
  values: Values,
): Promise<number> {
  const code = commandLine.join(' ');
  if (code.trim() === '') throw new UsageError('run-code needs code after --');
  const language = values.language === undefined ? undefined : CodeLanguageSchema.safeParse(values.language);
  if (language && !language.success) {
    throw new UsageError(`--language must be one of ${CodeLanguageSchema.options.join(', ')}`);
  }
  const timeout = seconds('timeout', values.timeout);
  const controller = new AbortController();
  const onInterrupt = () => controller.abort();
  process.once('SIGINT', onInterrupt);
  try {
    const execution = await client.sandboxes.handle(id).runCode(code, {
      ...(language?.data ? { language: language.data } : {}),
      ...(values.context !== undefined ? { context: values.context } : {}),
      ...(timeout !== undefined ? { timeoutSeconds: timeout } : {}),
      signal: controller.signal,
      onStdout: (line) => process.stdout.write(`${line}\n`),
      onStderr: (line) => process.stderr.write(`${line}\n`),
    });
    const text = mainResultText(execution);
    if (text !== undefined) process.stdout.write(`${text}\n`);
    if (execution.stateLost) {
      process.stderr.write('sandstream: the context had lost its state (its kernel was restarted)\n');
    }
    if (execution.error) {
      const { name, value, traceback } = execution.error;
      process.stderr.write(
        `${traceback.trim() === '' ? `${name}: ${value}` : traceback.replace(/\n?$/, '\n')}`,
      );
      if (execution.timedOut) process.stderr.write(`sandstream: ${value}\n`);
      return execution.timedOut ? ExitCodes.timedOut : ExitCodes.failed;
    }
    return ExitCodes.succeeded;
  } catch (err) {
    if (err instanceof CommandCancelledError) return ExitCodes.cancelled;
    if (err instanceof SandboxCodeError) {
      process.stderr.write(`sandstream: ${err.message}\n`);
      return ExitCodes.execFailed;
    }
    throw err;
  } finally {
    process.removeListener('SIGINT', onInterrupt);
  }
}
