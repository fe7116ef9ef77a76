import { performance } from 'node:perf_hooks';
import {
  type ControlMessage,
  decodeStep,
  errorResult,
  type SandboxKeys,
  SCHEMA_VERSION,
  type Step,
  type StepResult,
  StepResultSchema,
} from '@sandstream/wire';
import type { ChainableCommander } from 'ioredis';
import { AuthFailureClock, isAuthError } from './auth-failure.js';
import { ControlWatcher } from './control-watcher.js';
import { EventPublisher } from './event-publisher.js';
import { ExitCode } from './exit-codes.js';
import { Heartbeat } from './heartbeat.js';
import type { Logger } from './logger.js';
import type { AgentConnections } from './redis-connections.js';
import { closeGracefully, closeNow } from './redis-connections.js';
import { ResultSink } from './result-sink.js';
import type { StepContext, StepOutcome } from './steps/step-context.js';
import { withinMs } from './within-ms.js';

/** The shortest time the agent waits for Redis at boot before giving up (exit 3). */
const MIN_BOOT_WAIT_MS = 5000;

/** Default of --auth-retry-seconds (see config.ts). */
const DEFAULT_AUTH_RETRY_MS = 120_000;

/** Pause between pops while Redis refuses our credentials (the connection reconnects meanwhile). */
const AUTH_RETRY_PAUSE_MS = 500;

/** How long cleanup waits for Redis before giving up on a tidy exit. */
const CLEANUP_WAIT_MS = 2000;

export type ExecuteStep = (step: Step, ctx: StepContext) => Promise<StepOutcome>;

export interface AgentLoopOptions {
  jobId: string;
  keys: SandboxKeys;
  connections: AgentConnections;
  execute: ExecuteStep;
  log: Logger;
  workdir: string;
  idleTimeoutSeconds: number;
  maxIdleWaits: number;
  heartbeatIntervalMs: number;
  /** How long Redis may refuse our credentials (WRONGPASS/NOAUTH) before the agent gives up (exit 3). */
  authRetryMs?: number;
  eventBufferLines: number;
  eventBufferBytes: number;
  notifyStream?: string | undefined;
  notifyStreamMaxLength: number;
}

interface RunningStep {
  stepId: string;
  controller: AbortController;
}

/**
 * The agent's job loop: pop a step (FIFO), run it, stream its events, push its result; repeat
 * until a shutdown step, the idle limit, or stop(). Nothing a producer writes to `:in` can end
 * the loop except a valid shutdown step: malformed messages are answered with an error result.
 */
export class AgentLoop {
  private stopping = false;
  private running: RunningStep | null = null;
  /** Set while run() waits for Redis at boot, so stop() can end that wait. */
  private onStop: (() => void) | null = null;
  private readonly heartbeat: Heartbeat;
  private readonly control: ControlWatcher;
  private readonly results: ResultSink;
  private readonly auth: AuthFailureClock;

  constructor(private readonly options: AgentLoopOptions) {
    const { connections, keys, log } = options;
    this.auth = new AuthFailureClock(options.authRetryMs ?? DEFAULT_AUTH_RETRY_MS);
    this.heartbeat = new Heartbeat({
      redis: connections.writer,
      key: keys.heartbeat,
      intervalMs: options.heartbeatIntervalMs,
      log,
      currentStepId: () => this.running?.stepId ?? null,
    });
    this.control = new ControlWatcher({
      redis: connections.control,
      key: keys.control,
      log,
      onMessage: (message) => this.onControl(message),
    });
    this.results = new ResultSink({
      redis: connections.writer,
      resultsKey: keys.results,
      jobId: options.jobId,
      notifyStream: options.notifyStream,
      notifyStreamMaxLength: options.notifyStreamMaxLength,
      log,
      auth: this.auth,
    });
  }

  /** Runs until shutdown, idle limit or stop(); resolves with the process exit code. */
  async run(): Promise<ExitCode> {
    const { log, keys } = this.options;
    // The heartbeat goes first, so a watcher sees the agent alive before it takes any step.
    if (!(await this.startHeartbeat())) {
      await this.cleanup();
      return ExitCode.ok;
    }
    this.control.start();
    log.info('agent started', { in: keys.in, pid: process.pid });
    let exitCode: ExitCode = ExitCode.ok;
    try {
      exitCode = await this.loop();
    } finally {
      await this.cleanup();
    }
    return exitCode;
  }

  /**
   * Writes the first heartbeat, waiting through Redis being unreachable for at most the idle
   * limit (idle-timeout-seconds x max-idle-waits, at least 5 s): an agent that never reaches Redis must not
   * linger forever. Returns false if stop() came first; throws when the limit passes.
   */
  private async startHeartbeat(): Promise<boolean> {
    const { idleTimeoutSeconds, maxIdleWaits } = this.options;
    // Never below a few seconds: with test-sized idle settings (0.1 s) a slow first connect
    // on a busy machine is not a dead Redis.
    const limitMs = Math.max(idleTimeoutSeconds * maxIdleWaits * 1000, MIN_BOOT_WAIT_MS);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      this.heartbeat.start().then(() => 'started' as const),
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), limitMs);
      }),
      new Promise<'stopped'>((resolve) => {
        this.onStop = () => resolve('stopped');
      }),
    ]);
    clearTimeout(timer);
    this.onStop = null;
    if (outcome === 'timeout') {
      this.heartbeat.stop();
      throw new Error(`could not reach Redis within ${limitMs / 1000} s of starting`);
    }
    if (outcome === 'stopped') this.heartbeat.stop();
    return outcome === 'started';
  }

  /**
   * SIGTERM/SIGINT: abort the running step (its executor kills the process group), let the
   * loop deliver that step's events and result, then leave. An idle pop is interrupted at once.
   */
  stop(reason: string): void {
    if (this.stopping) return;
    this.stopping = true;
    this.options.log.info('stopping', { reason, runningStep: this.running?.stepId ?? null });
    this.onStop?.();
    if (this.running) this.running.controller.abort(new Error(`agent stopping: ${reason}`));
    // A BRPOP cannot be interrupted politely (QUIT would queue behind it): drop the socket.
    else closeNow(this.options.connections.steps);
  }

  private async loop(): Promise<ExitCode> {
    const { connections, keys, log, idleTimeoutSeconds, maxIdleWaits } = this.options;
    let idleWaits = 0;
    while (!this.stopping) {
      let popped: [string, string] | null;
      try {
        popped = await connections.steps.brpop(keys.in, idleTimeoutSeconds);
        this.auth.succeeded();
      } catch (err) {
        if (this.stopping) break;
        if (isAuthError(err)) {
          // Redis is back but our user is not (yet): not idle time and not bad input. Wait for
          // the service to re-create it; give up (exit 3) only after the clock's limit.
          if (!this.auth.failing)
            log.warn('Redis refuses our credentials; retrying', { error: (err as Error).message });
          this.auth.failed();
          this.auth.assertNotExpired();
          await new Promise((resolve) => setTimeout(resolve, AUTH_RETRY_PAUSE_MS));
          continue;
        }
        if ((err as Error).name !== 'ReplyError') throw err;
        // Redis refused the pop (e.g. WRONGTYPE: someone wrote a string to `:in`). That is bad
        // input, not a reason to die: wait one idle period, count it as idle, and try again.
        log.error('popping a step failed', { key: keys.in, error: (err as Error).message });
        await new Promise((resolve) => setTimeout(resolve, idleTimeoutSeconds * 1000));
        popped = null;
      }
      if (!popped) {
        idleWaits += 1;
        log.debug('idle', { idleWaits, maxIdleWaits });
        if (idleWaits >= maxIdleWaits) {
          log.info('idle limit reached, exiting', { idleSeconds: idleWaits * idleTimeoutSeconds });
          return ExitCode.idle;
        }
        continue;
      }
      idleWaits = 0;
      if ((await this.handle(popped[1])) === 'shutdown') return ExitCode.ok;
    }
    return ExitCode.ok;
  }

  private async handle(raw: string): Promise<'continue' | 'shutdown'> {
    const { log } = this.options;
    const started = performance.now();
    const decoded = decodeStep(raw);
    if (!decoded.ok) {
      log.warn('invalid step', { stepId: decoded.stepId, error: decoded.error });
      await this.results.deliver(errorResult(decoded.stepId, 'invalid_step', decoded.error));
      return 'continue';
    }
    const step = decoded.value;
    if (step.kind === 'shutdown') {
      log.info('shutdown step received', { stepId: step.stepId });
      await this.results.deliver(
        this.result(step.stepId, started, { exitCode: 0, timedOut: false, errorMessage: null }),
      );
      return 'shutdown';
    }
    log.debug('step started', { stepId: step.stepId, kind: step.kind });
    const { result, eventsWritten, appendCompleted } = await this.runStep(step, started);
    log.debug('step finished', {
      stepId: step.stepId,
      exitCode: result.exitCode,
      errorCode: result.errorCode,
      durationSeconds: result.durationSeconds,
    });
    // The lines were handed to the writer connection first, so `completed` and the result (one
    // pipeline, one write) follow them on the wire without waiting a round trip for their
    // acknowledgement.
    await Promise.all([eventsWritten, this.results.deliver(result, appendCompleted)]);
    return 'continue';
  }

  private async runStep(
    step: Exclude<Step, { kind: 'shutdown' }>,
    started: number,
  ): Promise<{
    result: StepResult;
    eventsWritten: Promise<void>;
    appendCompleted: (pipeline: ChainableCommander) => void;
  }> {
    const { connections, keys, log, workdir } = this.options;
    const controller = new AbortController();
    this.running = { stepId: step.stepId, controller };
    // A stop() that raced with the pop still cancels this step rather than letting it run on.
    if (this.stopping) controller.abort(new Error('agent stopping'));
    const events = new EventPublisher({
      redis: connections.writer,
      key: keys.events,
      stepId: step.stepId,
      maxBufferedLines: this.options.eventBufferLines,
      maxBufferedBytes: this.options.eventBufferBytes,
      log,
      auth: this.auth,
    });
    events.started();
    let outcome: StepOutcome;
    try {
      outcome = await this.options.execute(step, {
        onLine: (stream, line) => events.line(stream, line),
        acceptingLines: () => events.accepting(),
        onDroppedLine: () => events.droppedLine(),
        signal: controller.signal,
        baseDirectory: workdir,
      });
    } catch (err) {
      // Executors are not supposed to throw; if one does, the step still gets an answer.
      log.error('step executor threw', { stepId: step.stepId, error: err });
      outcome = errorResult(
        step.stepId,
        'internal',
        `the agent failed to run the step: ${(err as Error).message}`,
      );
    } finally {
      this.running = null;
    }
    const { handedOver, written, appendCompleted } = events.finish(outcome.exitCode);
    const result = this.result(step.stepId, started, {
      ...outcome,
      droppedLines: events.droppedLines,
      outputLines: events.outputLines,
    });
    await handedOver;
    return { result, eventsWritten: written, appendCompleted };
  }

  /** Fills the fields only the loop knows, and checks the executor's outcome against the schema. */
  private result(stepId: string, started: number, outcome: StepOutcome): StepResult {
    const candidate = {
      ...outcome,
      schemaVersion: SCHEMA_VERSION,
      stepId,
      durationSeconds: Math.round(performance.now() - started) / 1000,
    };
    const checked = StepResultSchema.safeParse(candidate);
    if (checked.success) return checked.data;
    this.options.log.error('executor returned an invalid outcome', { stepId, error: checked.error.message });
    return errorResult(
      stepId,
      'internal',
      'the step executor returned an invalid outcome',
      candidate.durationSeconds,
    );
  }

  private onControl(message: ControlMessage): void {
    const running = this.running;
    if (running && message.kind === 'cancel' && message.stepId === running.stepId) {
      this.options.log.info('cancelling step', { stepId: message.stepId, reason: message.reason });
      running.controller.abort(new Error(message.reason ?? 'cancelled'));
      return;
    }
    // A cancel for a step that already finished (or never ran here) must not touch the next one.
    this.options.log.debug('ignoring cancel for a step that is not running', {
      stepId: message.stepId,
      runningStepId: running?.stepId ?? null,
    });
  }

  private async cleanup(): Promise<void> {
    const { connections, log } = this.options;
    const controlDone = this.control.stop();
    closeNow(connections.control);
    await controlDone;
    closeNow(connections.steps);
    if (connections.writer.status !== 'ready') {
      // Redis is unreachable right now: a clean exit must not wait for it (the heartbeat, if
      // one was ever written, expires by its TTL instead).
      this.heartbeat.stop();
      log.warn('Redis unreachable at exit: heartbeat left to expire by its TTL');
      closeNow(connections.writer);
      return;
    }
    const deleted = await withinMs(
      CLEANUP_WAIT_MS,
      this.heartbeat.stopAndDelete().then(
        () => true,
        (err: Error) => {
          log.warn('could not delete heartbeat', { error: err.message });
          return true;
        },
      ),
    );
    if (deleted === undefined)
      log.warn('heartbeat not deleted: Redis did not answer; it will expire by its TTL');
    if (
      (await withinMs(
        CLEANUP_WAIT_MS,
        closeGracefully(connections.writer).then(() => true),
      )) === undefined
    ) {
      closeNow(connections.writer);
    }
  }
}
