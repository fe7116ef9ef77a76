import {
  type Deadline,
  type DispatchKeys,
  type DispatchPayload,
  deadlineMember,
  enqueueDestroy,
  isLiveSandboxSpec,
  isTerminal,
  JobField,
  type JobState,
  type JobStore,
  type KeySpace,
  type LiveSandboxSpec,
  materializeSteps,
  parseStoredSpec,
  pushCancel,
  type RedisClient,
  SANDBOX_PAUSE_MARK,
  SandboxCloseReason,
  type SandboxDestroyPayload,
  type SlotRelease,
  type StoredSpec,
  stepIdFor,
} from '@sandstream/bus';
import {
  injectTraceContext,
  type Logger,
  type SandstreamMetrics,
  withExtractedContext,
} from '@sandstream/telemetry';
import { type CompletionNotice, encodeCancel, errorResult, resultKey, StreamLimits } from '@sandstream/wire';
import type { Queue } from 'bullmq';
import {
  advanceScript,
  cancelScript,
  finishScript,
  idleScript,
  openScript,
  startScript,
} from './dispatch-scripts.js';
import { lostSandboxReason } from './lost-sandbox-reason.js';
import { StepTelemetry } from './step-telemetry.js';

export interface StepDispatcherOptions {
  redis: RedisClient;
  keySpace: KeySpace;
  dispatchKeys: DispatchKeys;
  jobStore: JobStore;
  destroyQueue: Queue<SandboxDestroyPayload>;
  /** Gives the job's slot back when it ends, before its sandbox's destroy runs. */
  slots: SlotRelease;
  logger: Logger;
  /** Step duration and dropped-lines metrics; omitted, none are recorded. */
  metrics?: SandstreamMetrics;
  /** Added to a step's timeout before the dispatcher gives up on its result (agent gone or stuck). */
  stepGraceMs: number;
  /** How long the dispatch state of a finished job is kept (redelivered notices find it). */
  finishedStateTtlMs: number;
  /** How long the agent has to confirm a cancel before the job ends `cancelled` anyway. */
  cancelConfirmMs: number;
  /** The operator's cap on a live sandbox's lifetime (its own timeoutSeconds applies below it). */
  maxSandboxLifetimeSeconds?: number;
  /**
   * A deadline was set or moved to `at` (epoch ms): the sweeper sleeps until the earliest one it
   * knows of, so a new one must wake it (DeadlineSweeper.wake).
   */
  onDeadlineSet?: (at: number) => void;
  /** A job or live sandbox started running here: loops that rest while nothing runs resume. */
  onRunning?: () => void;
}

type ScriptReply = [string, ...(string | number)[]];

/**
 * Drives each job's steps: push the first on dispatch, the next on each completion, finish on
 * the first failure (unless continueOnError), a timeout, a cancel or a lost sandbox. All state
 * is in Redis; every operation is idempotent, so any instance can handle any job and a
 * redelivered message (BullMQ retry, XAUTOCLAIM, swept deadline) never runs a step twice.
 */
export class StepDispatcher {
  /** dispatcher.step spans and step metrics (step-telemetry.ts); no-ops when telemetry is off. */
  private readonly telemetry: StepTelemetry;
  private readonly shardStreams: Set<string>;

  constructor(private readonly options: StepDispatcherOptions) {
    this.telemetry = new StepTelemetry(options);
    const keys = options.dispatchKeys;
    this.shardStreams = new Set(keys.allShards().map((s) => keys.completionStream(s)));
  }

  /** A sandbox is ready (pod-lifecycle moved the job to running): push its first step. */
  async start(payload: DispatchPayload): Promise<void> {
    const { jobStore, logger, dispatchKeys } = this.options;
    const { jobId } = payload;
    // Any shard will do (on a Cluster pod-lifecycle picks one on the agent's node), but it must
    // be one this dispatcher reads, or the job's completions would go unread.
    if (!this.shardStreams.has(payload.notifyStream)) {
      logger.error(
        { jobId, notifyStream: payload.notifyStream, shards: dispatchKeys.shards },
        'dispatch names a completion stream this dispatcher does not read (check COMPLETION_SHARDS)',
      );
    }
    const record = await jobStore.get(jobId);
    if (!record) {
      await this.destroy(jobId, 'failed', 'job record missing at dispatch');
      return;
    }
    if (record.state !== 'running') {
      // pod-lifecycle moves a job to running before it adds the dispatch (docs/services.md);
      // anything else was ended meanwhile (cancelled, timed out, failed while starting).
      await this.destroy(jobId, record.state, `job is ${record.state} at dispatch`);
      return;
    }
    let spec: StoredSpec;
    try {
      spec = parseStoredSpec(record.spec);
    } catch {
      await jobStore.transition(jobId, ['running'], 'failed', { reason: 'stored job spec is invalid' });
      await this.destroy(jobId, 'failed', 'stored job spec is invalid');
      return;
    }
    if (isLiveSandboxSpec(spec)) {
      await this.open(jobId, spec, record.updatedAt);
      return;
    }
    const steps = materializeSteps(spec, payload.traceContext);
    this.telemetry.plan(steps);
    const now = Date.now();
    const args: (string | number)[] = [now];
    for (const s of steps)
      args.push(s.step.stepId, JSON.stringify(s.step), s.timeoutSeconds, s.continueOnError ? 1 : 0);
    const keys = this.options.keySpace.sandbox(jobId);
    const reply = await startScript.run<ScriptReply>(
      this.options.redis,
      [dispatchKeys.dispatchState(jobId), keys.in, this.options.keySpace.job(jobId)],
      args,
    );
    const shard = dispatchKeys.shardOf(jobId);
    const { redis } = this.options;
    // NX: a redelivered dispatch must not push the job's own deadline further out.
    const jobDeadline = record.updatedAt + spec.timeoutSeconds * 1000;
    await Promise.all([
      redis.zadd(dispatchKeys.running(shard), 'NX', now, jobId),
      redis.zadd(dispatchKeys.deadlines(shard), 'NX', jobDeadline, deadlineMember({ kind: 'job', jobId })),
    ]);
    this.options.onRunning?.();
    this.options.onDeadlineSet?.(jobDeadline);
    await this.afterReply(jobId, reply);
  }

  /**
   * A live sandbox is ready: open it for commands (they come from clients, not from here), and
   * leave its lifetime and idle deadlines.
   */
  private async open(jobId: string, spec: LiveSandboxSpec, readySince: number): Promise<void> {
    const { dispatchKeys, redis } = this.options;
    const now = Date.now();
    const idleMs = spec.idleTimeoutSeconds * 1000;
    const lifetime = Math.min(
      spec.timeoutSeconds,
      this.options.maxSandboxLifetimeSeconds ?? spec.timeoutSeconds,
    );
    const maxLifetime = this.options.maxSandboxLifetimeSeconds ?? spec.timeoutSeconds;
    const endsAt = readySince + lifetime * 1000;
    // The script writes the end and its cap with readyAt (see dispatch-open-3.lua for why).
    const reply = await openScript.run<ScriptReply>(
      redis,
      [
        dispatchKeys.dispatchState(jobId),
        this.options.keySpace.job(jobId),
        this.options.keySpace.sandbox(jobId).events,
      ],
      [now, idleMs, spec.onIdle, StreamLimits.eventStreamMaxLength, endsAt, readySince + maxLifetime * 1000],
    );
    if (reply[0] === 'opened') {
      // Ready is a field, not a state (running before and after): lists hear it from here.
      await this.options.jobStore.publishChange({ jobId, tenant: spec.tenant, what: 'ready' });
      const shard = dispatchKeys.shardOf(jobId);
      // NX: a redelivered dispatch must not push either deadline further out.
      // A client may have moved the end already: its deadline fires at the old end, finds the
      // record's later end and moves itself there (onDeadline).
      await Promise.all([
        redis.zadd(dispatchKeys.running(shard), 'NX', now, jobId),
        redis.zadd(dispatchKeys.deadlines(shard), 'NX', endsAt, deadlineMember({ kind: 'job', jobId })),
        redis.zadd(
          dispatchKeys.deadlines(shard),
          'NX',
          now + idleMs,
          deadlineMember({ kind: 'idle', jobId }),
        ),
      ]);
      this.options.onRunning?.();
      this.options.onDeadlineSet?.(Math.min(endsAt, now + idleMs));
      this.options.logger.info(
        { jobId, idleSeconds: spec.idleTimeoutSeconds, lifetimeSeconds: lifetime },
        'sandbox open for commands',
      );
      return;
    }
    await this.afterReply(jobId, reply);
  }

  /** The agent finished a step (its result is on the results list). */
  async onCompletion(notice: CompletionNotice): Promise<void> {
    const advancedAt = Date.now();
    const reply = await this.advance(notice.jobId, notice.stepId, '');
    const stepSpan = await this.telemetry.completed(notice.jobId, notice.stepId, reply, advancedAt);
    await withExtractedContext(stepSpan, () => this.afterReply(notice.jobId, reply));
  }

  /** Handles a due deadline; a returned time keeps it, due again then (a sandbox not yet idle). */
  async onDeadline(deadline: Deadline): Promise<number | undefined> {
    const { jobId } = deadline;
    if (deadline.kind === 'idle') {
      const reply = await idleScript.run<ScriptReply>(
        this.options.redis,
        [this.options.dispatchKeys.dispatchState(jobId), this.options.keySpace.job(jobId)],
        [Date.now()],
      );
      if (reply[0] === 'later') return Number(reply[1]);
      if (reply[0] === 'finished' && Number(reply[3]) === 1)
        this.options.logger.info({ jobId, outcome: reply[1] }, 'sandbox idle: closing or pausing');
      await this.afterReply(jobId, reply);
      return undefined;
    }
    if (deadline.kind === 'step') {
      // No result within timeout + grace: the agent is stuck or gone. Ask it to kill the step
      // (harmless if it is gone) and record the step as timed out in its place.
      const message = `no result for step ${deadline.stepId} within its timeout plus ${this.options.stepGraceMs} ms grace`;
      await pushCancel(this.options.redis, this.options.keySpace, jobId, {
        stepId: deadline.stepId,
        reason: message,
      });
      const result = errorResult(deadline.stepId, 'timed_out', message);
      const advancedAt = Date.now();
      const reply = await this.advance(jobId, deadline.stepId, JSON.stringify(result));
      const stepSpan = await this.telemetry.completed(jobId, deadline.stepId, reply, advancedAt);
      await withExtractedContext(stepSpan, () => this.afterReply(jobId, reply));
      return;
    }
    if (deadline.kind === 'job') {
      const spec = await this.options.jobStore.getSpec(jobId);
      // A live sandbox's lifetime is its timeout: it ends closed (reason `lifetime`).
      const live = spec !== null && isLiveSandboxSpec(spec);
      if (live) {
        // A client moved its end later (setTimeout) and this deadline was not moved yet: keep it.
        const endsAt = await this.endsAt(jobId);
        if (endsAt !== undefined && endsAt > Date.now()) return endsAt;
      }
      const reason = live
        ? SandboxCloseReason.lifetime
        : `job exceeded its timeout of ${spec?.timeoutSeconds ?? '?'} s`;
      // Before the finish: a command asked for from now on is refused, not killed half-way.
      if (live) await this.options.jobStore.markClosing(jobId, reason);
      await this.finish(jobId, 'timed-out', reason);
      return undefined;
    }
    await this.finish(jobId, 'cancelled', 'cancelled (the agent did not confirm the cancel in time)');
    return undefined;
  }

  /**
   * A client moved a live sandbox's end (libs/bus sandbox-timeout.ts wrote it on the record):
   * its lifetime deadline goes there, sooner or later. XX: a sandbox that ended (its deadline
   * gone) is not given one back.
   */
  async onLifetimeRequest(jobId: string): Promise<void> {
    const endsAt = await this.endsAt(jobId);
    if (endsAt === undefined) return;
    const { dispatchKeys, redis } = this.options;
    await redis.zadd(
      dispatchKeys.deadlines(dispatchKeys.shardOf(jobId)),
      'XX',
      endsAt,
      deadlineMember({ kind: 'job', jobId }),
    );
    this.options.onDeadlineSet?.(endsAt);
    this.options.logger.info({ jobId, endsAt: new Date(endsAt).toISOString() }, 'sandbox end moved');
  }

  private async endsAt(jobId: string): Promise<number | undefined> {
    const raw = await this.options.redis.hget(this.options.keySpace.job(jobId), JobField.endsAt);
    const endsAt = raw === null ? Number.NaN : Number(raw);
    return Number.isFinite(endsAt) ? endsAt : undefined;
  }

  /**
   * A cancel request (the flag is on the job record already, see libs/bus cancel-request.ts):
   * tell the agent to kill the running step, and leave a deadline that ends the job even if the
   * agent never confirms. A job not dispatched yet needs nothing: the start script sees the flag.
   */
  async onCancelRequest(jobId: string, reason: string): Promise<void> {
    const { dispatchKeys, keySpace, redis } = this.options;
    if ((await redis.hget(dispatchKeys.dispatchState(jobId), 'live')) === '1') {
      // Closing a live sandbox: no step to confirm; its shutdown kills every running command.
      await this.finish(jobId, 'cancelled', reason);
      return;
    }
    const reply = await this.namingRunningStep((stepId) =>
      cancelScript.run<ScriptReply>(
        redis,
        [dispatchKeys.dispatchState(jobId), keySpace.sandbox(jobId).control],
        [stepId, stepId === '' ? '' : encodeCancel(stepId, reason)],
      ),
    );
    if (reply[0] !== 'signalled') return;
    const confirmBy = Date.now() + this.options.cancelConfirmMs;
    await redis.zadd(
      dispatchKeys.deadlines(dispatchKeys.shardOf(jobId)),
      confirmBy,
      deadlineMember({ kind: 'cancel', jobId }),
    );
    this.options.onDeadlineSet?.(confirmBy);
  }

  /**
   * A pause request (the record is marked already, see libs/bus sandbox-pause.ts): the sandbox's
   * life ends `paused` as a close would end it, its commands stopped, its slot given back, and
   * its destroy (pod-lifecycle) keeps its files. A sandbox no longer open (closed meanwhile, or
   * not dispatched: the pause script asks only of a ready one) is left to what ended it.
   */
  async onPauseRequest(jobId: string): Promise<void> {
    const { dispatchKeys, redis } = this.options;
    if ((await redis.hget(dispatchKeys.dispatchState(jobId), 'live')) !== '1') {
      this.options.logger.warn({ jobId }, 'pause request for a sandbox not open for commands; ignored');
      return;
    }
    await this.finish(jobId, 'paused', SANDBOX_PAUSE_MARK);
  }

  /**
   * The agent stopped heart-beating. Ours to end whether or not this job has dispatch state
   * (docs/services.md, "Who rescues a job"): without it (the state expired, or the job came from
   * the job index) the record is moved to failed directly and the sandbox destroyed. Only a
   * `running` job: the dispatcher never moves a job out of another state (a `starting` job is
   * pod-lifecycle's, or the reaper's when stuck).
   */
  /**
   * `detail`: what the backend check found (HeartbeatMonitor), appended to the reason; `known`:
   * the reason itself when the check already found it (an agent locked out of Redis).
   */
  async onSandboxLost(jobId: string, detail?: string, known?: string): Promise<void> {
    const { keySpace, redis } = this.options;
    await this.failRunning(jobId, async () => {
      const reason = known ?? (await lostSandboxReason(redis, keySpace, jobId));
      return detail ? `${reason}: ${detail}` : reason;
    });
  }

  /**
   * A running job ends `failed` for a reason found outside its steps (its sandbox lost, or over
   * its Redis budget), and its sandbox is destroyed; the same whether or not it has dispatch state.
   */
  async failRunning(jobId: string, reasonOf: () => Promise<string> | string): Promise<void> {
    const { jobStore, keySpace, redis } = this.options;
    const record = await jobStore.get(jobId);
    if (record?.state !== 'running') {
      // A stale index entry (the index is updated after the transition): nothing runs.
      await redis.zrem(keySpace.jobsByState('running'), jobId);
      return;
    }
    const reason = await reasonOf();
    const reply = await this.finishReply(jobId, 'failed', reason);
    if (reply[0] === 'unknown') await this.finalize(jobId, 'failed', reason);
    else await this.afterReply(jobId, reply);
  }

  private advance(jobId: string, stepId: string, resultJson: string): Promise<ScriptReply> {
    const { dispatchKeys, keySpace, redis } = this.options;
    const keys = keySpace.sandbox(jobId);
    return advanceScript.run<ScriptReply>(
      redis,
      [dispatchKeys.dispatchState(jobId), keys.in, resultKey(keys, stepId), keySpace.job(jobId)],
      [stepId, resultJson],
    );
  }

  private async finish(jobId: string, outcome: JobState, reason: string): Promise<void> {
    await this.afterReply(jobId, await this.finishReply(jobId, outcome, reason));
  }

  /** The finish script's reply, its cancel naming the step that runs at that moment. */
  private finishReply(jobId: string, outcome: JobState, reason: string): Promise<ScriptReply> {
    const { dispatchKeys, keySpace, redis } = this.options;
    return this.namingRunningStep((stepId) =>
      finishScript.run<ScriptReply>(
        redis,
        [dispatchKeys.dispatchState(jobId), keySpace.sandbox(jobId).control],
        [outcome, reason, stepId, stepId === '' ? '' : encodeCancel(stepId, reason)],
      ),
    );
  }

  /**
   * Runs a script that pushes a cancel for the running step: first naming none, then, while it
   * answers 'stale', the step it names (the cancel message is encoded here, by the wire, not in
   * Lua). Steps move on only as fast as agents finish them, so two rounds are the rule.
   */
  private async namingRunningStep(run: (stepId: string) => Promise<ScriptReply>): Promise<ScriptReply> {
    let reply = await run('');
    for (let round = 0; round < 10 && reply[0] === 'stale'; round++) reply = await run(String(reply[1]));
    return reply;
  }

  /**
   * Everything that follows a state change but cannot be in the same script (other slots, other
   * queues). Each action is idempotent and derived from the reply, so repeating it after a crash
   * (the message is redelivered and the script answers the same way) completes what was missed.
   */
  private async afterReply(jobId: string, reply: ScriptReply): Promise<void> {
    const { dispatchKeys, redis, logger } = this.options;
    const [what] = reply;
    const shard = dispatchKeys.shardOf(jobId);
    if (what === 'pushed') {
      const [, , stepId, timeoutSeconds] = reply;
      const at = Date.now() + Number(timeoutSeconds) * 1000 + this.options.stepGraceMs;
      const index = Number(reply[1]);
      const current = deadlineMember({ kind: 'step', jobId, stepId: String(stepId) });
      const previous =
        index > 0 ? [deadlineMember({ kind: 'step', jobId, stepId: stepIdFor(index - 1) })] : [];
      await Promise.all([
        redis.zadd(dispatchKeys.deadlines(shard), 'NX', at, current),
        ...previous.map((member) => redis.zrem(dispatchKeys.deadlines(shard), member)),
      ]);
      this.options.onDeadlineSet?.(at);
      return;
    }
    if (what === 'finished') {
      const [, outcome, reason] = reply;
      await this.finalize(jobId, String(outcome) as JobState, String(reason));
      return;
    }
    if (what === 'missing') logger.warn({ jobId }, 'completion notice without a result on the list; ignored');
    if (what === 'unknown') {
      // A deadline or notice for a job this dispatcher never started (or whose state expired).
      await Promise.all([
        redis.zrem(dispatchKeys.running(shard), jobId),
        redis.zrem(dispatchKeys.deadlines(shard), ...this.jobDeadlines(jobId)),
      ]);
    }
  }

  private async finalize(jobId: string, outcome: JobState, reason: string): Promise<void> {
    const { dispatchKeys, redis, jobStore, logger } = this.options;
    const moved = await jobStore.transition(jobId, ['running'], outcome, {
      reason,
      ...(outcome === 'paused' ? { pausedAt: Date.now() } : {}),
    });
    if (moved.status === 'ok') logger.info({ jobId, outcome, reason }, 'job finished');
    await this.releaseSlot(jobId);
    const shard = dispatchKeys.shardOf(jobId);
    await Promise.all([
      redis.zrem(dispatchKeys.running(shard), jobId),
      redis.zrem(dispatchKeys.deadlines(shard), ...this.jobDeadlines(jobId)),
      this.removeStepDeadlines(jobId, null),
    ]);
    if ((await redis.hget(dispatchKeys.dispatchState(jobId), 'live')) === '1')
      await this.cancelCommands(
        jobId,
        outcome === 'paused' ? 'the sandbox is pausing' : `the sandbox is closing (${reason})`,
      );
    await this.destroy(jobId, outcome, reason);
    await redis.pexpire(dispatchKeys.dispatchState(jobId), this.options.finishedStateTtlMs);
  }

  /**
   * A live sandbox is closing: every command of it without a result is cancelled, so that its
   * agent frees its slots, answers what still waits in `:in` as cancelled, and reaches the
   * shutdown the destroy pushes after them instead of starting each of them first.
   */
  private async cancelCommands(jobId: string, why: string): Promise<void> {
    const record = await this.options.jobStore.get(jobId);
    const open = Object.keys(record?.commands ?? {}).filter((id) => !(id in (record?.stepResults ?? {})));
    await pushCancel(
      this.options.redis,
      this.options.keySpace,
      jobId,
      ...open.map((stepId) => ({ stepId, reason: why })),
    );
  }

  private jobDeadlines(jobId: string): string[] {
    return [
      deadlineMember({ kind: 'job', jobId }),
      deadlineMember({ kind: 'cancel', jobId }),
      deadlineMember({ kind: 'idle', jobId }),
    ];
  }

  /** Removes the deadlines of the job's steps except `keep` (the one now running). */
  private async removeStepDeadlines(jobId: string, keep: string | null): Promise<void> {
    const { dispatchKeys, redis } = this.options;
    const ids = await redis.hget(dispatchKeys.dispatchState(jobId), 'n');
    const n = Number(ids ?? 0);
    const members: string[] = [];
    for (let i = 0; i < n; i++) {
      const stepId = stepIdFor(i);
      if (stepId !== keep) members.push(deadlineMember({ kind: 'step', jobId, stepId }));
    }
    if (members.length > 0) await redis.zrem(dispatchKeys.deadlines(dispatchKeys.shardOf(jobId)), ...members);
  }

  /**
   * The job is over: its slot goes to a waiting job now rather than after the destroy (shutdown
   * step, grace, container removal). Only for a job that is terminal: a finalize that lost a race
   * to a still-live state must not free a slot that job still uses. A crash before this leaves the
   * release to the destroy (idempotent) and, past that, to the lease's expiry.
   */
  private async releaseSlot(jobId: string): Promise<void> {
    const record = await this.options.jobStore.get(jobId);
    // A paused sandbox holds no slot either: that is what pausing is for.
    if (record && (isTerminal(record.state) || record.state === 'paused'))
      await this.options.slots.release(jobId, record.tenant);
  }

  private async destroy(jobId: string, outcome: JobState | undefined, reason: string): Promise<void> {
    // The teardown joins the job's trace under the span active here (the last step's).
    const traceContext = injectTraceContext();
    await enqueueDestroy(this.options.destroyQueue, {
      jobId,
      reason,
      ...(outcome ? { outcome } : {}),
      ...(traceContext ? { traceContext } : {}),
    });
  }
}
