import { Writable } from 'node:stream';
import { trace } from '@opentelemetry/api';
import { type DestinationStream, type LevelWithSilent, type Logger, pino } from 'pino';
import { z } from 'zod';

export const LogLevelSchema = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

export interface CreateLoggerOptions {
  /** Becomes the `service` field of every line, so mixed logs can be told apart. */
  service: string;
  /** Defaults to LOG_LEVEL from the environment, else `info`. */
  level?: LevelWithSilent;
  /** Where lines go; stdout unless given (tests pass a stream to read lines back). */
  destination?: DestinationStream;
}

/**
 * Reads the active span at the moment a line is written (not when the logger is created), so a
 * logger made once at start-up tags each line with whatever job's trace is current in that
 * async context. Lines outside any span carry no ids at all rather than zeros.
 */
function traceMixin(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const sc = span.spanContext();
  if (!trace.isSpanContextValid(sc)) return {};
  return {
    trace_id: sc.traceId,
    span_id: sc.spanId,
    trace_flags: `0${sc.traceFlags.toString(16)}`.slice(-2),
  };
}

function levelFromEnv(): LevelWithSilent {
  const raw = process.env.LOG_LEVEL;
  if (raw === undefined || raw === '') return 'info';
  const parsed = LogLevelSchema.safeParse(raw.toLowerCase());
  if (!parsed.success) {
    throw new Error(`LOG_LEVEL must be one of ${LogLevelSchema.options.join(', ')}; got "${raw}"`);
  }
  return parsed.data;
}

/** A pino JSON logger whose lines carry `trace_id` / `span_id` whenever a span is active. */
export function createLogger(options: CreateLoggerOptions): Logger {
  return pino(
    {
      level: options.level ?? levelFromEnv(),
      base: { service: options.service, pid: process.pid },
      mixin: traceMixin,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}

/**
 * A logger that writes nothing, for tests and benches: it is handed a stream that drops every
 * chunk, so no stdout stream is opened on its behalf.
 */
export function silentLogger(service: string): Logger {
  return createLogger({
    service,
    level: 'silent',
    destination: new Writable({ write: (_c, _e, cb) => cb() }),
  });
}

export type { Logger } from 'pino';
