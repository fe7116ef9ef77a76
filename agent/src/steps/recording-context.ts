import type { OutputStream, StepContext } from './step-context.js';

export interface RecordedLine {
  stream: OutputStream;
  line: string;
}

/**
 * A StepContext that keeps every line in memory, with an AbortController to cancel the step.
 * For tests and local tools; the agent loop has its own, bounded, context.
 */
export function recordingContext(baseDirectory: string): {
  ctx: StepContext;
  lines: RecordedLine[];
  abort: AbortController;
  text(stream: OutputStream): string[];
} {
  const lines: RecordedLine[] = [];
  const abort = new AbortController();
  return {
    ctx: { baseDirectory, signal: abort.signal, onLine: (stream, line) => lines.push({ stream, line }) },
    lines,
    abort,
    text: (stream) => lines.filter((l) => l.stream === stream).map((l) => l.line),
  };
}
