import type { JobSpec } from '@sandstream/bus';
import type { StepResult } from '@sandstream/wire';
import type { FollowItem } from '../follow-entry.js';
import { gapLines, type OutputGap } from '../seq-gaps.js';

/** Where the renderer writes: process.stdout / stderr, or a buffer in front of them. */
export interface TextSink {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface RenderTarget {
  out: TextSink;
  err: TextSink;
}

/** "2,774": a long log's counts are read at a glance only with separators. */
export function formatCount(count: number): string {
  return count.toLocaleString('en-US');
}

/** "1 line", "2,774 lines": counts the CLI prints must not read "1 lines". */
export function plural(count: number, singular: string, pluralForm = `${singular}s`): string {
  return `${formatCount(count)} ${count === 1 ? singular : pluralForm}`;
}

/** The marker standing where a follower missed lines: "… 2,774 lines not shown …". */
export function describeGap(gap: OutputGap): string {
  return `… ${plural(gapLines(gap), 'line')} not shown …`;
}

const WAITING_STATES = new Set(['queued', 'scheduled', 'starting']);
const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** A one-line summary of a step for its header: "run: make test" or "readFile: src/a.ts". */
export function describeStep(spec: JobSpec | null, stepId: string): string {
  const index = Number(/^step-(\d+)$/.exec(stepId)?.[1] ?? 0) - 1;
  const step = spec?.steps[index];
  if (!step) return stepId;
  const label = step.name ? `${step.name} — ` : '';
  switch (step.kind) {
    case 'run':
      return `${label}run: ${[step.command, ...step.args].join(' ')}`.slice(0, 200);
    case 'grep':
      return `${label}grep: ${step.pattern} in ${step.path}`;
    default:
      return `${label}${step.kind}: ${step.path}`;
  }
}

/**
 * Prints a job's timeline: step headers, output lines, state changes. On a TTY a spinner
 * shows while the sandbox starts (on stderr, erased once there is something to show); when
 * output is piped every line is plain text, so logs and CI captures stay clean.
 */
export class TimelineRenderer {
  private spinner: NodeJS.Timeout | undefined;
  private frame = 0;
  private spinnerText = '';

  constructor(
    private readonly target: RenderTarget,
    private readonly spec: JobSpec | null,
  ) {}

  private get tty(): boolean {
    return this.target.err.isTTY === true;
  }

  render(item: FollowItem): void {
    this.stopSpinner();
    switch (item.type) {
      case 'state':
        this.target.err.write(`● ${item.to}${item.reason ? ` (${item.reason})` : ''}\n`);
        if (!item.terminal && WAITING_STATES.has(item.to))
          this.startSpinner(`waiting for the sandbox (${item.to})`);
        break;
      case 'cancel-requested':
        this.target.err.write(`● cancel requested${item.reason ? `: ${item.reason}` : ''}\n`);
        break;
      case 'progress':
        // On a TTY the spinner carries it (one line that moves); piped, one line per report.
        if (this.tty && !item.progress.done) this.startSpinner(item.message);
        else this.target.err.write(`● ${item.message}\n`);
        break;
      case 'step-started':
        this.target.out.write(`▶ ${item.stepId}  ${describeStep(this.spec, item.stepId)}\n`);
        break;
      case 'output':
        (item.stream === 'stderr' ? this.target.err : this.target.out).write(`${item.line}\n`);
        break;
      case 'gap':
        // The step's header went with its start: print it here, or its lines would run on
        // under the previous step's.
        if (item.startTrimmed)
          this.target.out.write(
            `▶ ${item.stepId}  ${describeStep(this.spec, item.stepId)}  (its start was trimmed from the log)\n`,
          );
        if (gapLines(item) > 0) this.target.out.write(`${describeGap(item)}\n`);
        break;
      case 'step-completed': {
        const dropped = item.droppedLines > 0 ? `, ${plural(item.droppedLines, 'line')} dropped` : '';
        this.target.out.write(`◀ ${item.stepId}  exit ${item.exitCode ?? '-'}${dropped}\n`);
        break;
      }
    }
  }

  private startSpinner(text: string): void {
    if (!this.tty) return;
    this.spinnerText = text;
    const draw = () => {
      this.target.err.write(`\r${FRAMES[this.frame++ % FRAMES.length]} ${this.spinnerText}`);
    };
    draw();
    this.spinner = setInterval(draw, 80);
  }

  stopSpinner(): void {
    if (!this.spinner) return;
    clearInterval(this.spinner);
    this.spinner = undefined;
    this.target.err.write('\r\x1b[2K');
  }
}

/**
 * Structured results (file, list and grep steps) do not travel as output lines; the CLI prints
 * a short form of them under the step, so `--follow` shows what such a step found.
 */
export function describeOutput(result: StepResult | undefined, maxLines = 20): string[] {
  if (!result) return [];
  const lines: string[] = [];
  if (result.errorMessage) lines.push(`  error: ${result.errorMessage}`);
  const output = result.output;
  if (!output) return lines;
  switch (output.kind) {
    case 'readFile':
      lines.push(
        ...output.content
          .replace(/\n$/, '')
          .split('\n')
          .map((l) => `  │ ${l}`),
      );
      break;
    case 'writeFile':
      lines.push(`  wrote ${plural(output.bytesWritten, 'byte')} to ${output.path}`);
      break;
    case 'listFiles':
      lines.push(
        ...output.entries.map((e) => `  ${e.type === 'directory' ? 'd' : '-'} ${e.path} (${e.sizeBytes} B)`),
      );
      if (output.truncated) lines.push('  … (truncated)');
      break;
    case 'grep':
      lines.push(...output.matches.map((m) => `  ${m.path}:${m.line}:${m.column}: ${m.text}`));
      if (output.matches.length === 0) lines.push('  (no matches)');
      if (output.truncated) lines.push('  … (truncated)');
      break;
  }
  return lines.length > maxLines
    ? [...lines.slice(0, maxLines), `  … ${plural(lines.length - maxLines, 'more line', 'more lines')}`]
    : lines;
}
