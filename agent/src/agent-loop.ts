import { performance } from 'node:perf_hooks';
import type { ControlMessage, SandboxKeys, Step, StepResult } from '@sandstream/wire';
import { checkStepResult, errorResult, SCHEMA_VERSION } from '@sandstream/wire/lean';
import { AuthFailureClock, isAuthError } from './auth-failure.js';
import { DEFAULT_MAX_PARALLEL_STEPS } from './config.js';
import { ControlWatcher } from './control-watcher.js';
import { type AppendCompleted, EventPublisher } from './event-publisher.js';
import { ExitCode } from './exit-codes.js';
import { decodeStep, fullWire } from './full-wire.js';
import { Heartbeat } from './heartbeat.js';
import type { Logger } from './logger.js';
import { announceReady } from './ready-announcement.js';
import type { AgentConnections } from './redis-connections.js';
import { closeGracefully, closeNow } from './redis-connections.js';
import { ResultSink } from './result-sink.js';
import { CancelReason } from './steps/cancel-reason.js';
import type { StepContext, StepOutcome } from './steps/step-context.js';
import { StreamBudget } from './stream-budget.js';
import { withinMs } from './within-ms.js';
import { DEFAULT_REDIS_RATE_LIMIT, WritePace } from './write-pace.js';

/** The shortest time the agent waits for Redis at boot before giving up (exit 3). */
const MIN_BOOT_WAIT_MS = 5000;

/** An agent that never leaves on idleness still gives up on an unreachable Redis at boot after this many idle periods. */
const BOOT_WAITS_WITHOUT_IDLE_EXIT = 5;

/** Default of --auth-retry-seconds (see config.ts). */
const DEFAULT_AUTH_RETRY_MS = 120_000;

/** Pause between pops while Redis refuses our credentials (the connection reconnects meanwhile). */
const AUTH_RETRY_PAUSE_MS = 500;

/** What the loop's pop is raced against (see `interrupted`). */
const INTERRUPTED = Symbol('interrupted');

/** Cancels of not-started steps remembered at most (a live sandbox has at most 64 commands pending). */
const MAX_REMEMBERED_CANCELS = 1024;

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
  /** File steps stay inside workdir (config.ts confineFiles). */
  confineFiles?: boolean;
  /** Directories outside workdir a confined file step may reach through a link (config.ts). */
  confineAllow?: readonly string[];
  idleTimeoutSeconds: number;
  maxIdleWaits: number;
  heartbeatIntervalMs: number;
  /** How long Redis may refuse our credentials (WRONGPASS/NOAUTH) before the agent gives up (exit 3). */
  authRetryMs?: number;
  eventBufferLines: number;
  eventBufferBytes: number;
  notifyStream?: string | undefined;
  notifyStreamMaxLength: number;
  /**
   * How many steps marked `parallel` may run at once; the next waits in `:in` until one ends.
   * Each has its own event buffer (eventBufferLines / eventBufferBytes), so this also bounds
   * the memory output can take.
   */
  maxParallelSteps?: number;
  /**
   * The log archive is on: keep the events stream below this many entries (plus lines in flight)
   * by slowing steps down instead of dropping their lines; see StreamBudget. Absent: off.
   */
  logArchiveHighWater?: number | undefined;
  /**
   * The sandbox's Redis rate limit in commands per second (AGENT_REDIS_RATE_LIMIT, as the
   * step-dispatcher enforces it): event writes keep to a share of it (write-pace.ts). 0: unpaced.
   */
  redisRateLimit?: number;
  /**
   * Called once, right after the first heartbeat is in Redis: work the agent needs soon but a
   * sandbox's start does not wait for (the spawner helper's fork) starts here, out of the boot.
   */
  onStarted?: (() => void) | undefined;
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
  /** Every step now running, by id: one sequential step, or up to maxParallelSteps parallel ones. */
  private readonly running = new Map<string, RunningStep>();
  /** Parallel steps in flight, each settling once its result is delivered. */
  private readonly parallel = new Set<Promise<void>>();
  /** Background steps in flight (a live sandbox's servers): outside the parallel limit, not activity. */
  private readonly background = new Set<Promise<void>>();
  /** True while a step without the parallel mark runs: the loop is not in a pop then. */
  private sequentialRunning = false;
  /**
   * Cancels that named no running step, newest last, bounded: a parallel step still waiting in
   * `:in` (the agent at its parallel limit) that a client already cancelled is answered
   * `cancelled` when it is popped instead of being run.
   */
  private readonly cancelledBeforeStart = new Set<string>();
  /** A parallel step whose result could not be delivered: as fatal as for a sequential one. */
  private fatal: Error | null = null;
  /**
   * Settles once stop() or a fatal error wants the loop out of its pop. Dropping the socket is
   * not enough: a BRPOP in flight when the connection broke waits in ioredis's resend queue,
   * which no error settles until a reconnect succeeds, and while Redis refuses our credentials
   * none does.
   */
  private readonly interrupted: Promise<typeof INTERRUPTED>;
  private interrupt: () => void = () => {};
  private readonly maxParallel: number;
  /** Set while run() waits for Redis at boot, so stop() can end that wait. */
  private onStop: (() => void) | null = null;
  private readonly heartbeat: Heartbeat;
  private readonly control: ControlWatcher;
  private readonly results: ResultSink;
  private readonly auth: AuthFailureClock;
  /** Shared by every step: they all write to the one events stream. */
  private readonly budget: StreamBudget | undefined;
  /** Shared by every step: the rate limit is the sandbox's. */
  private readonly pace: WritePace;

  constructor(private readonly options: AgentLoopOptions) {
    const { connections, keys, log } = options;
    this.auth = new AuthFailureClock(options.authRetryMs ?? DEFAULT_AUTH_RETRY_MS);
    this.interrupted = new Promise((resolve) => {
      this.interrupt = () => resolve(INTERRUPTED);
    });
    this.maxParallel = options.maxParallelSteps ?? DEFAULT_MAX_PARALLEL_STEPS;
    this.budget =
      options.logArchiveHighWater === undefined
        ? undefined
        : new StreamBudget({
            redis: connections.writer,
            key: keys.events,
            highWater: options.logArchiveHighWater,
            log,
          });
    this.pace = new WritePace({ limitPerSecond: options.redisRateLimit ?? DEFAULT_REDIS_RATE_LIMIT });
    this.heartbeat = new Heartbeat({
      redis: connections.writer,
      key: keys.heartbeat,
      intervalMs: options.heartbeatIntervalMs,
      log,
      onWritten: (err) => this.heartbeatWritten(err),
      currentStepId: () => this.running.keys().next().value ?? null,
    });
    this.control = new ControlWatcher({
      redis: connections.control,
      key: keys.control,
      log,
      onMessage: (message) => this.onControl(message),
    });
    this.results = new ResultSink({
      redis: connections.writer,
      keys,
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
    announceReady(this.options.connections.writer, keys.ready, log);
    this.control.start();
    this.options.onStarted?.();
    log.info('agent started', {
      in: keys.in,
      pid: process.pid,
      // With the archive on a step can be slowed down: say so where an operator looks first.
      ...(this.budget ? { logArchiveHighWater: this.budget.highWater } : {}),
    });
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
    const waits = maxIdleWaits === 0 ? BOOT_WAITS_WITHOUT_IDLE_EXIT : maxIdleWaits;
    const limitMs = Math.max(idleTimeoutSeconds * waits * 1000, MIN_BOOT_WAIT_MS);
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
    this.options.log.info('stopping', { reason, runningSteps: [...this.running.keys()] });
    this.onStop?.();
    this.abortAll(new Error(`agent stopping: ${reason}`));
    // A BRPOP cannot be interrupted politely (QUIT would queue behind it): drop the socket.
    // While a sequential step runs the loop is not popping, and that step's end lets it leave.
    if (!this.sequentialRunning) this.leavePop();
  }

  /** Ends a pop in progress: the loop stops waiting for it, and its socket is dropped. */
  private leavePop(): void {
    this.interrupt();
    closeNow(this.options.connections.steps);
  }

  /**
   * The heartbeat writes on its own timer, so it sees refused credentials even while the pop waits
   * for an answer that never comes (ioredis resends a pop that was in flight when its socket
   * broke, and if each refused reconnect drops the socket before that resend's NOAUTH arrives,
   * the pop is never settled): past the clock's limit that is fatal (exit 3) here too.
   */
  private heartbeatWritten(err: Error | null): void {
    if (err === null) {
      this.auth.succeeded();
      return;
    }
    if (!isAuthError(err)) return;
    this.auth.failed();
    try {
      this.auth.assertNotExpired();
    } catch (expired) {
      this.fatal ??= expired as Error;
      this.leavePop();
    }
  }

  /**
   * The next step from `:in`, raced against stop() and fatal errors: ioredis can hold a pop whose
   * socket broke without ever settling it (see heartbeatWritten).
   */
  private async pop(): Promise<[string, string] | null | typeof INTERRUPTED> {
    const { connections, keys, idleTimeoutSeconds } = this.options;
    const pop = connections.steps.brpop(keys.in, idleTimeoutSeconds);
    const first = await Promise.race([pop, this.interrupted]);
    if (first === INTERRUPTED) {
      // Left behind on a dropped socket (leavePop), which never sends it again.
      pop.catch(() => {});
      return INTERRUPTED;
    }
    this.auth.succeeded();
    return first;
  }

  private abortAll(reason: Error): void {
    for (const step of this.running.values()) step.controller.abort(reason);
  }

  private async loop(): Promise<ExitCode> {
    const { keys, log, idleTimeoutSeconds, maxIdleWaits } = this.options;
    let idleWaits = 0;
    while (!this.stopping) {
      if (this.fatal) throw this.fatal;
      // Back-pressure: at the parallel limit, the next step waits in Redis, not in memory.
      while (this.parallel.size >= this.maxParallel) await Promise.race(this.parallel);
      if (this.stopping) break;
      let popped: [string, string] | null;
      try {
        const first = await this.pop();
        if (first === INTERRUPTED) {
          if (this.fatal) throw this.fatal;
          break;
        }
        popped = first;
      } catch (err) {
        if (this.fatal) throw this.fatal;
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
        // Not idle while a parallel step still runs (a live sandbox's 20-minute build).
        if (this.parallel.size > 0) {
          idleWaits = 0;
          continue;
        }
        idleWaits += 1;
        log.debug('idle', { idleWaits, maxIdleWaits });
        if (maxIdleWaits > 0 && idleWaits >= maxIdleWaits) {
          log.info('idle limit reached, exiting', { idleSeconds: idleWaits * idleTimeoutSeconds });
          return ExitCode.idle;
        }
        continue;
      }
      idleWaits = 0;
      if ((await this.handle(popped[1])) === 'shutdown') return ExitCode.ok;
    }
    // stop() aborted every step, background ones too; their results go out before the exit.
    await this.settleParallel(true);
    if (this.fatal) throw this.fatal;
    return ExitCode.ok;
  }

  /**
   * Waits until every parallel step has delivered its result; with `background`, the background
   * processes too (at shutdown and exit, after they were aborted). A step without the parallel
   * mark waits for parallel steps only: a server in the background may never end.
   */
  private async settleParallel(background = false): Promise<void> {
    const pending = () => [...this.parallel, ...(background ? this.background : [])];
    while (pending().length > 0) await Promise.allSettled(pending());
  }

  private async handle(raw: string): Promise<'continue' | 'shutdown'> {
    const { log } = this.options;
    const started = performance.now();
    const decoded = await decodeStep(raw);
    if (!decoded.ok) {
      log.warn('invalid step', { stepId: decoded.stepId, error: decoded.error });
      await this.results.deliver(errorResult(decoded.stepId, 'invalid_step', decoded.error));
      return 'continue';
    }
    const step = decoded.value;
    if (step.kind === 'shutdown') {
      log.info('shutdown step received', { stepId: step.stepId, runningSteps: [...this.running.keys()] });
      // Closing a sandbox ends what still runs in it: each parallel step's tree is killed and
      // its result delivered before the agent answers the shutdown and leaves.
      this.abortAll(new Error('the sandbox is shutting down'));
      await this.settleParallel(true);
      await this.results.deliver(
        this.result(step.stepId, started, { exitCode: 0, timedOut: false, errorMessage: null }),
      );
      return 'shutdown';
    }
    if (step.parallel && this.cancelledBeforeStart.delete(step.stepId)) {
      log.info('step cancelled before it started', { stepId: step.stepId });
      await this.results.deliver({
        ...errorResult(step.stepId, 'cancelled', 'cancelled before it started'),
        cancelled: true,
      });
      return 'continue';
    }
    if (step.parallel) {
      // A background process stays out of the parallel limit (it may run for hours); a
      // sandbox holds at most maxParallel of each.
      const set =
        (step.kind === 'run' && step.background) || step.kind === 'terminal' || step.kind === 'watch'
          ? this.background
          : this.parallel;
      if (set === this.background && set.size >= this.maxParallel) {
        await this.results.deliver(
          errorResult(
            step.stepId,
            'limit_exceeded',
            `at most ${this.maxParallel} background processes run at once`,
          ),
        );
        return 'continue';
      }
      const done = this.runAndDeliver(step, started)
        .catch((err: Error) => {
          // The loop rethrows it (exit 3, as for a sequential step); a pop in progress is cut.
          this.fatal ??= err;
          if (!this.sequentialRunning) this.leavePop();
        })
        .finally(() => set.delete(done));
      set.add(done);
      return 'continue';
    }
    // A step without the mark keeps FIFO order with everything before it.
    await this.settleParallel();
    this.sequentialRunning = true;
    try {
      await this.runAndDeliver(step, started);
    } finally {
      this.sequentialRunning = false;
    }
    return 'continue';
  }

  /** Runs one step and delivers its events and result; rejects only when the result cannot be delivered. */
  private async runAndDeliver(step: Exclude<Step, { kind: 'shutdown' }>, started: number): Promise<void> {
    const { log } = this.options;
    log.debug('step started', { stepId: step.stepId, kind: step.kind, parallel: step.parallel });
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
    // A parallel step's follower (a live sandbox's client) finds a plain result in `completed`
    // itself; a file step's structured output (up to MiBs) stays on the results list alone.
    const inEvent = step.parallel && result.output === undefined;
    await Promise.all([
      eventsWritten,
      this.results.deliver(result, (pipeline) => appendCompleted(pipeline, inEvent ? result : undefined)),
    ]);
  }

  private async runStep(
    step: Exclude<Step, { kind: 'shutdown' }>,
    started: number,
  ): Promise<{
    result: StepResult;
    eventsWritten: Promise<void>;
    appendCompleted: AppendCompleted;
  }> {
    const { connections, keys, log, workdir } = this.options;
    const controller = new AbortController();
    if (this.running.has(step.stepId)) {
      // The same id twice at once would share one cancel and one seq space: refuse the second.
      return {
        result: errorResult(step.stepId, 'invalid_step', `step ${step.stepId} is already running`),
        eventsWritten: Promise.resolve(),
        appendCompleted: () => {},
      };
    }
    this.running.set(step.stepId, { stepId: step.stepId, controller });
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
      budget: this.budget,
      pace: this.pace,
    });
    // Held for commands only: a transfer's end over HTTP raced its request body in the api
    // when `started` came with `completed` (test/e2e/live-sandbox.test.ts, "copies a tree").
    events.started(step.kind === 'run');
    let outcome: StepOutcome;
    try {
      outcome = await this.options.execute(step, {
        onLine: (stream, line) => events.line(stream, line),
        acceptingLines: () => events.accepting(),
        onDroppedLine: () => events.droppedLine(),
        onResult: (index, result) => events.result(index, result),
        holdingLines: () => events.holding(),
        whenAccepting: (callback) => events.onceAccepting(callback),
        signal: controller.signal,
        baseDirectory: workdir,
        confineFiles: this.options.confineFiles ?? false,
        confineAllow: this.options.confineAllow ?? [],
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
      this.running.delete(step.stepId);
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
    const checked = checkStepResult(candidate);
    if (checked) return checked;
    // A bug in an executor: the schema (loaded now, zod-free until then) says which field broke.
    const { log } = this.options;
    void fullWire().then(
      (wire) =>
        log.error('executor returned an invalid outcome', {
          stepId,
          error: wire.StepResultSchema.safeParse(candidate).error?.message,
        }),
      (err: unknown) => log.error('executor returned an invalid outcome', { stepId, error: String(err) }),
    );
    return errorResult(
      stepId,
      'internal',
      'the step executor returned an invalid outcome',
      candidate.durationSeconds,
    );
  }

  private onControl(message: ControlMessage): void {
    const running = this.running.get(message.stepId);
    if (running && message.kind === 'cancel') {
      this.options.log.info('cancelling step', { stepId: message.stepId, reason: message.reason });
      running.controller.abort(new CancelReason(message.reason ?? 'cancelled', message.signal ?? 'SIGTERM'));
      return;
    }
    // A cancel for a step that already finished (or never ran here) must not touch the next one;
    // remembered (bounded) in case it names a parallel step still waiting in `:in`.
    if (message.kind === 'cancel') {
      this.cancelledBeforeStart.add(message.stepId);
      if (this.cancelledBeforeStart.size > MAX_REMEMBERED_CANCELS) {
        const oldest = this.cancelledBeforeStart.values().next().value;
        if (oldest !== undefined) this.cancelledBeforeStart.delete(oldest);
      }
    }
    this.options.log.debug('ignoring cancel for a step that is not running', {
      stepId: message.stepId,
      runningSteps: [...this.running.keys()],
    });
  }

  private async cleanup(): Promise<void> {
    const { connections, log } = this.options;
    this.budget?.close();
    const controlDone = this.control.stop();
    closeNow(connections.control);
    // Bounded: its pop may be one ioredis never settles once its socket broke (see pop()).
    await withinMs(CLEANUP_WAIT_MS, controlDone);
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
