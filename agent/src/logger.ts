/**
 * A tiny structured logger: one JSON object per line on stderr. The agent is injected into
 * arbitrary images and must stay small, so it carries no logging library; stdout stays free
 * (the agent never writes to it) so that nothing can confuse a log collector reading both.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

export interface LoggerOptions {
  verbose: boolean;
  /** Where lines go; stderr unless a test wants them elsewhere. */
  write?: (line: string) => void;
  /** Fields added to every line (e.g. the job id). */
  base?: LogFields;
}

export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const base = options.base ?? {};
  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (level === 'debug' && !options.verbose) return;
    let line: string;
    try {
      line = JSON.stringify(
        { time: new Date().toISOString(), level, msg, ...base, ...fields },
        errorReplacer,
      );
    } catch {
      // A field that cannot be serialised (a cycle) must not take the agent down with it.
      line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...base, unserialisable: true });
    }
    write(`${line}\n`);
  };
  return {
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
  };
}

/** Errors serialise to `{}` by default; keep their message and stack. */
function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  return value;
}
