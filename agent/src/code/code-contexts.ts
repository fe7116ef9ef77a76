import type { CodeError, CodeLanguage, CodeOutput, CodeResult, CodeStep } from '@sandstream/wire';
import { defaultCodeContext, Limits } from '@sandstream/wire/lean';
import { LineSplitter } from '../steps/line-splitter.js';
import { failed } from '../steps/outcome.js';
import { stepDirectory } from '../steps/resolve-path.js';
import { childEnvironment } from '../steps/run-step.js';
import type { OutputStream, StepContext, StepOutcome } from '../steps/step-context.js';
import { BashKernel } from './bash-kernel.js';
import { JAVASCRIPT_RUNNER } from './javascript-runner.js';
import type { Kernel, KernelSink } from './kernel.js';
import { PYTHON_RUNNER } from './python-runner.js';
import { RunnerKernel } from './runner-kernel.js';

/** After an interrupt (timeout, cancel), how long a cell may take to stop before its kernel is killed. */
export const INTERRUPT_GRACE_MS = 3000;

/**
 * The code interpreter's contexts of one sandbox (docs/code-interpreter.md), by name: each a
 * kernel started on first use, in the order cells arrive, one cell at a time; contexts run side
 * by side. A kernel that died is started afresh by the next cell, whose output says the state was
 * lost. A timeout or cancel interrupts the cell and keeps the kernel; only a cell that does not
 * stop within INTERRUPT_GRACE_MS costs it.
 */
export class CodeContexts {
  private readonly contexts = new Map<string, CodeContext>();
  /** The kernels lead their own groups: they must not outlive the agent that leaves. */
  private readonly onExit = () => this.killAll();

  constructor(private readonly interruptGraceMs = INTERRUPT_GRACE_MS) {}

  run(step: CodeStep, ctx: StepContext): Promise<StepOutcome> {
    const name = step.context ?? defaultCodeContext(step.language);
    let context = this.contexts.get(name);
    if (context && context.language !== step.language) {
      return Promise.resolve(
        failed('invalid_step', `context "${name}" is a ${context.language} context, not ${step.language}`),
      );
    }
    if (!context) {
      if (this.contexts.size >= Limits.codeMaxContexts) {
        return Promise.resolve(
          failed('limit_exceeded', `at most ${Limits.codeMaxContexts} code contexts per sandbox`),
        );
      }
      const cwd = stepDirectory(ctx.baseDirectory, step.workingDirectory);
      context = new CodeContext(name, step.language, cwd, this.interruptGraceMs);
      if (this.contexts.size === 0) process.once('exit', this.onExit);
      this.contexts.set(name, context);
    }
    return context.run(step, ctx);
  }

  /** Kills every kernel with what it started (the agent is leaving). Synchronous: safe in 'exit'. */
  killAll(): void {
    for (const context of this.contexts.values()) context.kill();
    this.contexts.clear();
    process.removeListener('exit', this.onExit);
  }
}

/** The kernel for a language, started in `cwd` with the agent's environment. */
function newKernel(language: CodeLanguage, cwd: string): Kernel {
  const env = childEnvironment(null);
  switch (language) {
    case 'python':
      // Agg: figures render to memory (there is no display); the runner sends them as PNG.
      return new RunnerKernel({
        file: env.SANDSTREAM_PYTHON ?? 'python3',
        args: ['-u', '-c', PYTHON_RUNNER],
        what: 'python3',
        cwd,
        env: { ...env, MPLBACKEND: 'Agg', PYTHONUNBUFFERED: '1' },
      });
    case 'javascript':
      return new RunnerKernel({
        file: env.SANDSTREAM_NODE ?? 'node',
        args: ['-e', JAVASCRIPT_RUNNER],
        what: 'node',
        cwd,
        env,
      });
    case 'bash':
      return new BashKernel(cwd, env);
  }
}

class CodeContext {
  private kernel: Kernel | undefined;
  /** Cells of this context run one after another, in the order they arrived. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly name: string,
    readonly language: CodeLanguage,
    private readonly cwd: string,
    private readonly interruptGraceMs: number,
  ) {}

  run(step: CodeStep, ctx: StepContext): Promise<StepOutcome> {
    const next = this.queue.then(() => this.runNow(step, ctx));
    this.queue = next.catch(() => undefined);
    return next;
  }

  kill(): void {
    this.kernel?.kill();
  }

  private async runNow(step: CodeStep, ctx: StepContext): Promise<StepOutcome> {
    if (ctx.signal.aborted) return { ...failed('cancelled', 'cancelled before it started'), cancelled: true };
    // A kernel that ended since the last cell (killed, out of memory, exit()) took the state along.
    let stateLost = false;
    if (this.kernel && !this.kernel.alive) {
      stateLost = true;
      this.kernel = undefined;
    }
    // Said in the output: the services tell a kernel this agent started for a context an earlier
    // agent had (after a pause, or anything that replaced the agent) from a first use.
    let kernelStarted = false;
    if (!this.kernel) {
      kernelStarted = true;
      const kernel = newKernel(this.language, this.cwd);
      const refused = await kernel.start();
      if (refused) {
        kernel.kill();
        return failed('spawn_failed', refused);
      }
      this.kernel = kernel;
    }
    const kernel = this.kernel;
    const cell = new CellOutput(ctx);
    if (step.code.trim() === '') return cell.outcome(this.output(cell, null, stateLost, kernelStarted));

    let stopped: 'timeout' | 'cancel' | undefined;
    let killed = false;
    let graceTimer: NodeJS.Timeout | undefined;
    const stop = (why: 'timeout' | 'cancel') => {
      if (stopped) return;
      stopped = why;
      kernel.interrupt();
      graceTimer = setTimeout(() => {
        killed = true;
        kernel.kill();
      }, this.interruptGraceMs);
    };
    const timer = setTimeout(() => stop('timeout'), step.timeoutSeconds * 1000);
    const onAbort = () => stop('cancel');
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    const end = await kernel.execute(step.code, cell.sink).finally(() => {
      clearTimeout(timer);
      clearTimeout(graceTimer);
      ctx.signal.removeEventListener('abort', onAbort);
    });
    cell.end();

    let error: CodeError | null;
    if (end.kind === 'died') {
      this.kernel = undefined;
      stateLost = true;
      error = {
        name: 'KernelDied',
        value: killed
          ? `the cell did not stop within ${this.interruptGraceMs / 1000} s of its interrupt: its kernel was killed and the context starts afresh (its state is lost)`
          : `${end.detail}; the context starts afresh with the next cell (its state is lost)`,
        traceback: '',
      };
    } else error = end.error;
    const output = this.output(cell, error, stateLost, kernelStarted);
    if (!stopped) return cell.outcome(output);
    const kept = killed ? 'its kernel was killed (state lost)' : 'the context keeps its state';
    return stopped === 'timeout'
      ? {
          ...failed(
            'timed_out',
            `timed out after ${step.timeoutSeconds} s; the cell was interrupted and ${kept}`,
          ),
          output,
        }
      : {
          ...failed('cancelled', `cancelled; the cell was interrupted and ${kept}`),
          cancelled: true,
          output,
        };
  }

  private output(
    cell: CellOutput,
    error: CodeError | null,
    stateLost: boolean,
    kernelStarted: boolean,
  ): CodeOutput {
    return {
      kind: 'code',
      language: this.language,
      context: this.name,
      results: cell.results,
      error,
      stateLost,
      ...(kernelStarted ? { kernelStarted } : {}),
      ...(cell.droppedResults > 0 ? { droppedResults: cell.droppedResults } : {}),
    };
  }
}

/** What one cell produced: its output lines (to the step's events) and its results (bounded). */
class CellOutput {
  readonly results: CodeResult[] = [];
  droppedResults = 0;
  private resultBytes = 0;
  private readonly splitters: Record<OutputStream, LineSplitter>;
  readonly sink: KernelSink;

  constructor(private readonly ctx: StepContext) {
    this.splitters = {
      stdout: new LineSplitter((line) => ctx.onLine('stdout', line)),
      stderr: new LineSplitter((line) => ctx.onLine('stderr', line)),
    };
    this.sink = {
      text: (stream, text) => this.splitters[stream].push(Buffer.from(text, 'utf8')),
      line: (stream, line) => ctx.onLine(stream, line),
      result: (result) => this.add(result),
    };
  }

  private add(result: CodeResult): void {
    const bytes = Buffer.byteLength(JSON.stringify(result), 'utf8');
    if (this.resultBytes + bytes > Limits.codeResultsMaxBytes) {
      this.droppedResults++;
      return;
    }
    this.resultBytes += bytes;
    this.results.push(result);
    // Live as well (onResult in the SDK): only results the cell keeps, so that what a follower
    // saw live is always the same result at the same place in the final `results`.
    this.ctx.onResult?.(this.results.length - 1, result);
  }

  /** The cell is over: a last line without its newline is still the cell's. */
  end(): void {
    this.splitters.stdout.end();
    this.splitters.stderr.end();
  }

  outcome(output: CodeOutput): StepOutcome {
    return {
      exitCode: output.error ? 1 : 0,
      timedOut: false,
      errorMessage: null,
      output,
    };
  }
}
