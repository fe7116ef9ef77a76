import {
  bullJobId,
  type DispatcherPresence,
  type DispatchKeys,
  type DroppedJob,
  type ExpiredLeases,
  enqueueDestroy,
  freeSandboxFootprint,
  type InstallationIdentity,
  isLiveSandboxSpec,
  isTerminal,
  type JobRecord,
  type JobState,
  type JobStore,
  jobFootprint,
  jobIdFromKey,
  type KeySpace,
  PAUSED_EXPIRED_REASON,
  parseStoredSpec,
  type RedisClient,
  redisMasters,
  type SandboxAcl,
  type SandboxFilesKeeper,
  scanKeys,
  TEARDOWN_CLAIM_MS,
  TERMINAL_STATES,
  tearDownSandbox,
  teardownClaimKey,
  tryLock,
  VolumeStore,
  type WarmPoolStore,
} from '@sandstream/bus';
import { type SandboxBackend, type SandboxInfo, SandboxLabels } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import type { Queue } from 'bullmq';
import { type GlanceLimits, glanceJobs, isDueFinished, needsNoWork, sandboxVerdict } from './job-glance.js';
import { DELETE_FINISHED_JOB, DELETE_ORPHAN_KEY } from './reap-scripts.js';
import { reapVolumes } from './volume-reaping.js';

export interface ReaperOptions {
  redis: RedisClient;
  keys: KeySpace;
  store: JobStore;
  /** Leases of dead holders. */
  leases: ExpiredLeases;
  dispatchKeys: DispatchKeys;
  logger: Logger;
  /** Sandboxes by label; without it, orphaned sandboxes are not looked for. */
  backend?: SandboxBackend;
  /** Per-sandbox Redis users; without it, leftover users are not looked for. */
  acl?: SandboxAcl;
  /**
   * Warm pool members: a sandbox or user named by a member's id belongs to the member while it
   * is recorded (idle, or serving the job that claimed it); once the record is gone (its
   * pod-lifecycle died mid-start, or a retire was cut short) it is an orphan like any other.
   */
  pools?: WarmPoolStore;
  /** Asks pod-lifecycle to tear down the sandbox of a job the reaper ended. */
  destroyQueue?: Queue;
  /** Finished jobs (record, events, results) are kept this long after they end. */
  retentionMs: number;
  /**
   * Paused sandboxes: closed once paused longer than their spec's `pausedRetentionSeconds`,
   * capped by the operator's `maxPausedRetentionMs`; the files they kept are discarded through
   * `files` (also those of a sandbox closed while paused). Without `files`, kept files are left
   * and such records are not deleted (their reference would be lost with them).
   */
  paused?: { maxRetentionMs: number; files?: Pick<SandboxFilesKeeper, 'discard'> | undefined };
  /**
   * The JetStream log archive guard. A job whose log the archiver marked `pending` keeps its
   * keys until `holdMs` past retention; with `required` (the archive is on for this
   * installation), so does a job the archiver has not marked at all. Without it, only `pending`
   * marks hold, for the default hold of a day.
   */
  logArchive?: { required: boolean; holdMs: number };
  /** Keys with no job record must be idle this long before they go. */
  orphanGraceMs: number;
  /** A finished job's sandbox or Redis user still present this long after the end is an orphan. */
  sandboxGraceMs: number;
  /** A job in `starting` longer than this has lost its pod-lifecycle. */
  startingTimeoutMs: number;
  /** A `running` job whose agent heartbeat is gone is failed after this — only while no dispatcher is alive. */
  heartbeatGraceMs: number;
  /**
   * Live dispatchers (DispatcherPresence): ending a job whose agent is gone is theirs; the reaper
   * does it only when none has been alive for `dispatcherAbsentMs`. Without it, never.
   */
  dispatchers?: { presence: DispatcherPresence; absentMs: number };
  /**
   * This installation (several may share an engine): a sandbox is destroyed here only when it
   * carries one of this Redis's installation ids (`identity`), or, made by a version without that
   * label, carries one of `names` and its job's record is in this Redis and namespace. Without
   * it, no sandbox is destroyed.
   */
  installation?: { names: () => readonly string[]; identity: InstallationIdentity };
  /** Only jobs whose id matches this glob (tests; sharding the key space between reapers). */
  jobIdGlob?: string;
  /**
   * One pass in this many walks every job record and key (SCAN); the others read only what is
   * due from the state indexes (see reapIndexedJobs). 1 (the default): every pass walks.
   */
  fullScanEvery?: number;
  scanCount?: number;
  pauseMs?: number;
  now?: () => number;
  /** Told what each pass did (metrics). */
  onReport?: (report: ReapReport) => void;
}

export interface ReapReport {
  jobsScanned: number;
  jobsDeleted: number;
  jobsFailed: number;
  orphanKeysDeleted: number;
  leasesReclaimed: number;
  sandboxesDestroyed: number;
  aclUsersDeleted: number;
  /** Sandboxes labelled with this installation's name but another Redis's id: left alone. */
  sandboxesForeign: number;
  /** Finished jobs past retention whose log is not archived yet (kept). */
  jobsHeldForArchive: number;
  /** Volume holds of ended sandboxes given back; deleted volumes' backend objects removed. */
  volumeHoldsCleared: number;
  volumesRemoved: number;
  /** Paused sandboxes closed past their paused retention. */
  pausedExpired: number;
  /** Kept files of paused sandboxes discarded (expired, or closed while paused). */
  pausedFilesDiscarded: number;
  durationMs: number;
}

const emptyReport = (): ReapReport => ({
  jobsScanned: 0,
  jobsDeleted: 0,
  jobsFailed: 0,
  orphanKeysDeleted: 0,
  leasesReclaimed: 0,
  sandboxesDestroyed: 0,
  aclUsersDeleted: 0,
  sandboxesForeign: 0,
  jobsHeldForArchive: 0,
  volumeHoldsCleared: 0,
  volumesRemoved: 0,
  pausedExpired: 0,
  pausedFilesDiscarded: 0,
  durationMs: 0,
});

/**
 * Cleans up after everything that can die: finished jobs past retention, keys of jobs that no
 * longer exist, slot leases of dead holders, sandboxes and Redis users whose job ended or
 * vanished, and jobs stuck because the service holding them died. Every action re-checks its
 * condition atomically (Lua or compare-and-set), so several reapers can run at once and none
 * ever touches a live job.
 */
export class Reaper {
  private readonly now: () => number;
  /** When each job id was first seen without a job record (orphan grace; per process, by design). */
  private readonly missingSince = new Map<string, number>();
  /** Foreign sandboxes already logged (one line each, not one per pass). */
  private readonly foreignSeen = new Set<string>();
  /** Passes run so far: pass 0, and every fullScanEvery-th after it, walk everything. */
  private passes = 0;
  /** `now` of the previous pass: terminal jobs indexed since then get one look (kept files). */
  private lastPassAt: number | undefined;
  /**
   * Jobs deleted (or found gone) whose index entries are still to go: removed together by
   * dropDeletedIndexEntries after each batch, a ZREM per index instead of eleven commands a job.
   */
  private dropped: DroppedJob[] = [];

  constructor(private readonly options: ReaperOptions) {
    this.now = options.now ?? Date.now;
  }

  async runOnce(signal?: AbortSignal): Promise<ReapReport> {
    const started = Date.now();
    const report = emptyReport();
    report.leasesReclaimed = (await this.options.leases.reclaimExpired()).length;
    const full = this.passes % Math.max(1, this.options.fullScanEvery ?? 1) === 0;
    this.passes++;
    const passAt = this.now();
    if (full) {
      // The safety net: records missing from the indexes (written before them, or whose
      // cross-slot index write was lost) and keys left without a record.
      await this.reapJobs(report, signal);
      await this.reapOrphanKeys(report, signal);
    } else {
      await this.reapIndexedJobs(report, this.lastPassAt ?? passAt);
    }
    this.lastPassAt = passAt;
    await this.dropDeletedIndexEntries();
    if (this.options.backend) await this.reapSandboxes(report);
    if (this.options.acl) await this.reapAclUsers(report);
    const volumes = await reapVolumes(
      new VolumeStore(this.options.redis, this.options.keys, this.options.store),
      this.options.backend,
      (err, source) => this.options.logger.warn({ err, source }, 'volume removal failed; retried next pass'),
    );
    report.volumeHoldsCleared = volumes.holdsCleared;
    report.volumesRemoved = volumes.volumesRemoved;
    report.durationMs = Date.now() - started;
    this.options.onReport?.(report);
    return report;
  }

  private glob(): string {
    return this.options.jobIdGlob ?? '*';
  }

  private scan(match: string, signal?: AbortSignal) {
    return scanKeys(this.options.redis, {
      match,
      count: this.options.scanCount ?? 200,
      pauseMs: this.options.pauseMs ?? 10,
      ...(signal ? { signal } : {}),
    });
  }

  private async reapJobs(report: ReapReport, signal?: AbortSignal): Promise<void> {
    const { redis } = this.options;
    for await (const batch of this.scan(this.options.keys.job(this.glob()), signal)) {
      const jobIds = batch.map(jobIdFromKey).filter((id): id is string => id !== null);
      report.jobsScanned += jobIds.length;
      // Most jobs need nothing this pass (finished within retention, running and beating): a
      // glance at a few fields of the whole batch at once, and the full look only for the rest.
      const glances = await glanceJobs(redis, this.options.keys, jobIds);
      const limits = this.limits();
      for (const [i, jobId] of jobIds.entries()) {
        const glance = glances[i];
        if (glance && needsNoWork(glance, limits)) continue;
        await this.reapJob(jobId, report);
      }
      await this.dropDeletedIndexEntries();
    }
  }

  /**
   * Index entries of the jobs deleted since the last call. A crash before it leaves entries
   * whose record is gone: the next indexed pass finds them (glance without a state) and drops
   * them then.
   */
  private async dropDeletedIndexEntries(): Promise<void> {
    const dropped = this.dropped;
    this.dropped = [];
    await this.options.store.dropIndexEntries(dropped);
  }

  /**
   * A pass without the walk: only jobs the state indexes (`jobsByState`, ZSETs scored by the
   * time a job entered the state, written by every transition) say may need something: finished
   * jobs past retention, finished since the previous pass (kept files of a sandbox closed while
   * paused), `starting` or `running` past the time they count as stuck, and paused sandboxes. A
   * retained finished job is not read again until it is due: a walk read each one every pass
   * (0.43 ms per job per pass, a day's retention ~0.6 s per job; docs/benchmarks.md).
   */
  private async reapIndexedJobs(report: ReapReport, since: number): Promise<void> {
    const { redis, keys } = this.options;
    const now = this.now();
    const limits = this.limits();
    const due = new Set<string>();
    const read = async (state: JobState, min: number | string, max: number | string) => {
      const index = keys.jobsByState(state);
      for (let offset = 0; ; offset += INDEX_PAGE) {
        const page = await redis.zrangebyscore(index, min, max, 'LIMIT', offset, INDEX_PAGE);
        for (const id of page) if (matchesGlob(id, this.glob())) due.add(id);
        if (page.length < INDEX_PAGE) return;
      }
    };
    for (const state of TERMINAL_STATES) {
      await read(state, '-inf', now - this.options.retentionMs);
      await read(state, since, '+inf');
    }
    await read('starting', '-inf', now - this.options.startingTimeoutMs);
    if (this.options.dispatchers) await read('running', '-inf', now - this.options.heartbeatGraceMs);
    // Paused retention is each spec's own (capped): every paused sandbox gets its look.
    if (this.options.paused) await read('paused', '-inf', '+inf');
    const jobIds = [...due];
    report.jobsScanned += jobIds.length;
    const glances = await glanceJobs(redis, keys, jobIds);
    const look = async (jobId: string, i: number) => {
      const glance = glances[i];
      if (glance?.state === null) {
        // An index entry whose record is gone (its delete cut short): removed, or it would be
        // read every pass.
        this.dropped.push({ jobId });
        return;
      }
      if (glance && needsNoWork(glance, limits)) return;
      if (glance && isDueFinished(glance, limits)) {
        // Nothing to decide on the parsed record: the delete script checks what matters.
        await this.deleteFinished(jobId, undefined, report);
        return;
      }
      await this.reapJob(jobId, report);
    };
    // A few jobs at once: their commands share socket writes and wake-ups instead of a round
    // trip each after the other (every action re-checks atomically, so order does not matter).
    for (let at = 0; at < jobIds.length; at += JOBS_AT_ONCE) {
      await Promise.all(jobIds.slice(at, at + JOBS_AT_ONCE).map((id, k) => look(id, at + k)));
      await this.dropDeletedIndexEntries();
    }
  }

  private limits(): GlanceLimits {
    return {
      namespace: this.options.keys.namespace,
      now: this.now(),
      retentionMs: this.options.retentionMs,
      startingTimeoutMs: this.options.startingTimeoutMs,
      heartbeatGraceMs: this.options.heartbeatGraceMs,
    };
  }

  /**
   * Deletes a finished job past retention with its keys (the script re-checks state, end,
   * namespace and the archive guard atomically); its index entries go with its batch's
   * (dropDeletedIndexEntries).
   */
  private async deleteFinished(jobId: string, fallbackTenant: string | undefined, report: ReapReport) {
    const { redis } = this.options;
    const cutoff = this.now() - this.options.retentionMs;
    const archive = this.options.logArchive;
    const holdCutoff = cutoff - (archive?.holdMs ?? DEFAULT_ARCHIVE_HOLD_MS);
    const deleted = await DELETE_FINISHED_JOB.run<[string, string] | 'held' | null>(
      redis,
      jobFootprint(this.options.keys, this.options.dispatchKeys, jobId).keys,
      [cutoff, holdCutoff, archive?.required ? '1' : '0', this.options.keys.namespace],
    );
    if (deleted === 'held') report.jobsHeldForArchive++;
    if (deleted === null || deleted === 'held') return;
    const [tenant, marker] = deleted;
    if (marker === 'pending' || (archive?.required && marker !== 'done')) {
      // Past the hold: Redis must not fill up behind an archive that is down for days, but
      // the loss is logged, never silent.
      this.options.logger.error(
        { jobId, archive: marker || 'never seen' },
        'deleted a finished job whose log was not archived (past the hold)',
      );
    }
    // Index entries live in other slots; removing them after the keys is idempotent.
    this.dropped.push({ jobId, tenant: tenant || fallbackTenant });
    report.jobsDeleted++;
  }

  /** The full look at one job that may need something: re-checks everything on its record. */
  private async reapJob(jobId: string, report: ReapReport): Promise<void> {
    const { store } = this.options;
    const record = await store.get(jobId);
    // `job:{id}` carries no namespace: another namespace's job is never ours to delete or fail.
    if (!record || !(await this.owns(record))) return;
    if (record.state === 'paused' && (await this.closeIfPausedTooLong(record))) {
      report.pausedExpired++;
      return;
    }
    if (record.pausedFiles !== undefined && isTerminal(record.state)) {
      // Its files are kept nowhere else: discarded before its record may go (never after).
      if (!(await this.discardPausedFiles(record))) return;
      report.pausedFilesDiscarded++;
    }
    if (isTerminal(record.state)) {
      if ((record.finishedAt ?? 0) > this.now() - this.options.retentionMs) return;
      await this.deleteFinished(jobId, record.tenant, report);
      return;
    }
    if (await this.failIfStuck(record)) report.jobsFailed++;
  }

  /**
   * Whether a job record is this namespace's: its `namespace` field, or, on a record written before
   * the field existed, whether this namespace's tenant index lists it.
   */
  private async owns(record: JobRecord): Promise<boolean> {
    const { keys, redis } = this.options;
    if (record.namespace !== undefined) return record.namespace === keys.namespace;
    return (await redis.zscore(keys.jobsByTenant(record.tenant), record.id)) !== null;
  }

  /**
   * A paused sandbox past its paused retention (its spec's, capped by the operator's) ends
   * `timed-out` with reason `paused-expired` (it reads closed, paused-expired); its kept files are
   * discarded by the next step of the same pass, then its record goes with the usual retention.
   */
  private async closeIfPausedTooLong(record: JobRecord): Promise<boolean> {
    const paused = this.options.paused;
    if (!paused) return false;
    let retentionMs = paused.maxRetentionMs;
    try {
      const spec = parseStoredSpec(record.spec);
      if (isLiveSandboxSpec(spec)) retentionMs = Math.min(retentionMs, spec.pausedRetentionSeconds * 1000);
    } catch {
      // An unreadable spec keeps the operator's cap.
    }
    const since = record.pausedAt ?? record.updatedAt;
    if (this.now() - since <= retentionMs) return false;
    const moved = await this.options.store.transition(record.id, ['paused'], 'timed-out', {
      reason: PAUSED_EXPIRED_REASON,
    });
    if (moved.status !== 'ok') return false;
    this.options.logger.info(
      { jobId: record.id, pausedSeconds: Math.round((this.now() - since) / 1000) },
      'reaper closed a sandbox paused past its retention',
    );
    const closed = await this.options.store.get(record.id);
    if (closed?.pausedFiles !== undefined) await this.discardPausedFiles(closed);
    return true;
  }

  /** Discards a closed sandbox's kept files; false when they could not be (kept for the next pass). */
  private async discardPausedFiles(record: JobRecord): Promise<boolean> {
    const files = this.options.paused?.files;
    if (!files || record.pausedFiles === undefined) return false;
    try {
      await files.discard(record.pausedFiles);
    } catch (err) {
      this.options.logger.warn(
        { jobId: record.id, err: (err as Error).message },
        "reaper: could not discard a paused sandbox's kept files; next pass",
      );
      return false;
    }
    await this.options.store.clearPausedFiles(record.id);
    return true;
  }

  private async failIfStuck(record: JobRecord): Promise<boolean> {
    const { store, redis, keys } = this.options;
    const age = this.now() - record.updatedAt;
    let reason: string | undefined;
    if (record.state === 'starting' && age > this.options.startingTimeoutMs) {
      reason = `stuck in starting for ${Math.round(age / 1000)} s: the pod-lifecycle replica starting it is gone`;
    } else if (
      record.state === 'running' &&
      age > this.options.heartbeatGraceMs &&
      this.options.dispatchers
    ) {
      // The dispatcher's heartbeat monitor ends these (dispatch state or not); the reaper only
      // when no dispatcher has been alive for a while, so the two never race for one job.
      const { presence, absentMs } = this.options.dispatchers;
      const heartbeat = await redis.exists(keys.sandbox(record.id).heartbeat);
      if (heartbeat === 0 && !(await presence.anyAlive(absentMs, this.now()))) {
        reason = `agent stopped heart-beating and no step-dispatcher has been alive for ${Math.round(absentMs / 1000)} s`;
      }
    }
    if (!reason) return false;
    const result = await store.transition(record.id, [record.state], 'failed', { reason });
    if (result.status !== 'ok') return false;
    this.options.logger.warn({ jobId: record.id, from: record.state, reason }, 'reaper failed a stuck job');
    if (this.options.destroyQueue) {
      await enqueueDestroy(this.options.destroyQueue, {
        jobId: record.id,
        reason: `reaper: ${reason}`,
        outcome: 'failed',
      });
    }
    return true;
  }

  private async reapOrphanKeys(report: ReapReport, signal?: AbortSignal): Promise<void> {
    const { redis, keys } = this.options;
    const graceSeconds = Math.ceil(this.options.orphanGraceMs / 1000);
    const { dispatchKeys } = this.options;
    const patterns = [`${keys.sandboxPrefix(this.glob())}*`, dispatchKeys.dispatchState(this.glob())];
    for (const pattern of patterns) {
      for await (const batch of this.scan(pattern, signal)) {
        const owners = batch.map((key) => dispatchKeys.jobIdOfDispatchState(key) ?? jobIdFromKey(key));
        // A key whose job record exists is never an orphan (the script's first check): one EXISTS
        // per job of the batch, sent together, instead of a script call per key of every job.
        const jobIds = [...new Set(owners.filter((id): id is string => !!id))];
        const exists = await Promise.all(jobIds.map((id) => redis.exists(keys.job(id))));
        const recorded = new Set(jobIds.filter((_, i) => exists[i] === 1));
        for (const [i, key] of batch.entries()) {
          const jobId = owners[i];
          if (!jobId || recorded.has(jobId)) continue;
          const deleted = await DELETE_ORPHAN_KEY.run<number>(
            redis,
            [key, keys.job(jobId), keys.sandbox(jobId).heartbeat],
            [graceSeconds],
          );
          report.orphanKeysDeleted += deleted;
        }
      }
    }
  }

  /**
   * A finished job whose sandbox outlived it by the grace period, or a job that vanished and has
   * stayed vanished for the grace period (counted from when this reaper first saw it missing: a
   * Redis that comes back empty, or a job being re-created, gets that long before anything goes).
   */
  private async isOrphan(jobId: string, options: OrphanCheck = {}): Promise<boolean> {
    if (!matchesGlob(jobId, this.glob())) return false;
    const member = await this.options.pools?.get(jobId);
    if (member) {
      this.missingSince.delete(jobId);
      // A claimed member lives as long as the job it serves.
      return member.state === 'claimed' && member.claimedBy !== undefined && member.claimedBy !== jobId
        ? this.isOrphan(member.claimedBy, options)
        : false;
    }
    const record = await this.options.store.get(jobId);
    const now = this.now();
    // Another namespace's job: its sandbox and user are its own reaper's to judge.
    if (record && !(await this.owns(record))) return false;
    if (!record) {
      if (options.recordRequired) return false;
      if (
        options.heartbeatKeeps &&
        (await this.options.redis.exists(this.options.keys.sandbox(jobId).heartbeat)) === 1
      ) {
        this.missingSince.delete(jobId);
        return false;
      }
      const since = this.missingSince.get(jobId) ?? now;
      this.missingSince.set(jobId, since);
      if (now - since < this.options.sandboxGraceMs) return false;
      // Deleted right after its end (a short retention) with its destroy still queued: left to
      // pod-lifecycle for as long as a claim would hold, then torn down whatever happened.
      return !(now - since <= TEARDOWN_CLAIM_MS && (await this.destroyPending(jobId)));
    }
    this.missingSince.delete(jobId);
    if (!isTerminal(record.state)) return false;
    return now - (record.finishedAt ?? record.updatedAt) > this.options.sandboxGraceMs;
  }

  /**
   * The backend's sandboxes this reaper may judge: carrying one of this Redis's installation ids,
   * or, made before those ids, one of this installation's names (then only with a record here).
   */
  private async ourSandboxes(
    backend: SandboxBackend,
    report: ReapReport,
  ): Promise<{ sandbox: SandboxInfo; recordRequired: boolean }[]> {
    const { installation } = this.options;
    if (installation === undefined) return [];
    const ids = await installation.identity.known();
    const ours: { sandbox: SandboxInfo; recordRequired: boolean }[] = [];
    // Judged by record, never by process state: no per-sandbox liveness probe (ListOptions).
    for (const sandbox of await backend.list({ state: false })) {
      const id = sandbox.labels[SandboxLabels.installationId];
      const named = installation.names().includes(sandbox.labels[SandboxLabels.installation] ?? '');
      let recordRequired = false;
      if (id === undefined) {
        // Made before installation ids: ours only by name, and only with its record in this
        // Redis (a name may be shared by mistake; a record cannot be).
        if (!named) continue;
        recordRequired = true;
      } else if (!ids.has(id)) {
        // Another Redis's sandbox (or this one's before it lost its data with every service
        // restarted): its job lives where this reaper cannot look, so it is never judged here.
        if (named) {
          report.sandboxesForeign++;
          if (!this.foreignSeen.has(sandbox.id)) {
            this.foreignSeen.add(sandbox.id);
            this.options.logger.warn(
              { jobId: sandbox.jobId, sandbox: sandbox.id, installationId: id, ours: [...ids] },
              "sandbox with this installation's name but another Redis's installation id: left alone",
            );
          }
        }
        continue;
      }
      // Another shard's (jobIdGlob): isOrphan would say no; not even glanced at.
      if (matchesGlob(sandbox.jobId, this.glob())) ours.push({ sandbox, recordRequired });
    }
    return ours;
  }

  private async reapSandboxes(report: ReapReport): Promise<void> {
    const backend = this.options.backend!;
    const candidates = await this.ourSandboxes(backend, report);
    // Most of ours serve a running job (or one that ended within the grace): a glance at their
    // records, sent together, settles those; the rest get the full look (isOrphan). A record read
    // and parsed per sandbox per pass was most of the reaper's CPU per job (docs/benchmarks.md).
    const verdicts = await this.glanceVerdicts(candidates.map(({ sandbox }) => sandbox.jobId));
    for (const [i, { sandbox, recordRequired }] of candidates.entries()) {
      if (verdicts[i] === 'kept') continue;
      // Its teardown is taken (pod-lifecycle's destroy of a job that just ended, or another
      // reaper): one EXISTS instead of the full look and a second teardown of the same sandbox.
      const claim = teardownClaimKey(this.options.keys, sandbox.jobId);
      if ((await this.options.redis.exists(claim)) === 1) continue;
      if (verdicts[i] !== 'orphan' && !(await this.isOrphan(sandbox.jobId, { recordRequired }))) continue;
      // Taken only if still free: whoever is first tears down, the other leaves it.
      if (!(await tryLock(this.options.redis, claim, TEARDOWN_CLAIM_MS, 'reaper'))) continue;
      try {
        // The same teardown as pod-lifecycle's destroy: sandbox, pool record, Redis user, keys.
        await tearDownSandbox(
          { ...this.options, backend, acl: this.options.acl ?? null },
          {
            jobId: sandbox.jobId,
            ref: sandbox,
            member: sandbox.jobId,
            graceMs: 2000,
            keepOutput: true,
            scan: this.scanPace(),
          },
        );
        this.missingSince.delete(sandbox.jobId);
        report.sandboxesDestroyed++;
        this.options.logger.info(
          { jobId: sandbox.jobId, sandbox: sandbox.id },
          'reaper destroyed an orphaned sandbox',
        );
      } catch (err) {
        this.options.logger.warn(
          { jobId: sandbox.jobId, err: (err as Error).message },
          'orphaned sandbox not destroyed',
        );
      }
    }
  }

  /**
   * Whether a Redis user was made by this namespace, from the user itself (its job's record may be
   * gone): a job's user may write only its namespace's completion stream; a warm pool member's
   * has none, and its id starts with `<ns>-pool-` (pod-lifecycle's newMemberId).
   */
  private async aclUserIsOurs(acl: SandboxAcl, jobId: string): Promise<boolean> {
    const { keys } = this.options;
    const reply = (await redisMasters(this.options.redis)[0]!.call('ACL', 'GETUSER', acl.username(jobId))) as
      | unknown[]
      | null;
    if (!reply) return false;
    const at = reply.indexOf('keys');
    const patterns = at >= 0 ? String(reply[at + 1] ?? '') : '';
    const stream = /%W~(\{[^}]*\}\S*)/.exec(patterns)?.[1];
    if (stream === undefined) return jobId.startsWith(`${keys.namespace}-pool-`);
    return stream.startsWith(keys.completionStream(0).replace(/\d+\}:stream$/, ''));
  }

  /**
   * Per job id, what a glance at its record settles for its sandbox (or Redis user): `kept` (its
   * job runs or ended within the grace), `orphan` (this namespace's job ended past it) or `look`:
   * isOrphan's full record read and parse, also for every warm pool member (even one whose
   * record does not parse). The glances and the pool-membership HMGET leave together.
   */
  private async glanceVerdicts(jobIds: string[]): Promise<('kept' | 'orphan' | 'look')[]> {
    const [glances, members] = await Promise.all([
      glanceJobs(this.options.redis, this.options.keys, jobIds),
      this.options.pools?.areMembers(jobIds) ?? jobIds.map(() => false),
    ]);
    const now = this.now();
    const verdicts = jobIds.map((jobId, i) => {
      const glance = glances[i];
      if (members[i] || !glance) return 'look';
      const verdict = sandboxVerdict(glance, this.options.keys.namespace, now, this.options.sandboxGraceMs);
      // Its record is there: the vanished-job grace restarts, as isOrphan would have done.
      if (verdict !== 'look') this.missingSince.delete(jobId);
      return verdict;
    });
    // A job that ended moments ago has its destroy queued for pod-lifecycle, or about to be (the
    // step-dispatcher's finalize, between the terminal transition and the enqueue), and nobody
    // may have claimed the teardown yet (a short grace): kept while the destroy is due, waits,
    // runs or retries, for as long as a claim would hold. Past that the reaper tears down
    // whatever is left, so a destroy stuck behind a service that is gone still leaks nothing.
    const recent = jobIds.flatMap((jobId, i) => {
      const glance = glances[i];
      const endedAt = glance?.finishedAt ?? glance?.updatedAt ?? 0;
      return verdicts[i] === 'orphan' && now - endedAt <= TEARDOWN_CLAIM_MS ? [{ jobId, i }] : [];
    });
    const due = await Promise.all(
      recent.map(async ({ jobId }) => (await this.finalizing(jobId)) || (await this.destroyPending(jobId))),
    );
    for (const [k, { i }] of recent.entries()) if (due[k]) verdicts[i] = 'kept';
    return verdicts;
  }

  /**
   * Whether the step-dispatcher is still finalizing this job: its dispatch state gets a TTL only
   * once the job's destroy is queued (finalize), so a state without one means the enqueue is
   * still to come (a few round trips after the terminal transition, or never if that dispatcher
   * died: then the claim's time bounds the wait).
   */
  private async finalizing(jobId: string): Promise<boolean> {
    return (await this.options.redis.pttl(this.options.dispatchKeys.dispatchState(jobId))) === -1;
  }

  /** Whether pod-lifecycle has a destroy of this job waiting, running or due to be retried. */
  private async destroyPending(jobId: string): Promise<boolean> {
    const queue = this.options.destroyQueue;
    if (!queue) return false;
    // A finished BullMQ job has `finishedOn`; a completed destroy is removed (enqueueDestroy).
    const [name, finishedOn] = await (await queue.client).hmget(
      queue.toKey(bullJobId(jobId)),
      'name',
      'finishedOn',
    );
    return name !== null && finishedOn === null;
  }

  private async reapAclUsers(report: ReapReport): Promise<void> {
    const acl = this.options.acl!;
    // Every running job has a user: a record read and parsed per user per pass (isOrphan) was
    // the largest part of the reaper's CPU per job (docs/benchmarks.md, issue 32 part 5).
    const jobIds = (await acl.listJobIds()).filter((jobId) => matchesGlob(jobId, this.glob()));
    const verdicts = await this.glanceVerdicts(jobIds);
    for (const [i, jobId] of jobIds.entries()) {
      if (verdicts[i] === 'kept') continue;
      // Its sandbox's teardown is taken (pod-lifecycle's destroy, or this or another reaper's
      // teardown), which removes the user and what it stored: not a second time here. A claimant
      // that died leaves it to a pass after its claim lapses.
      if ((await this.options.redis.exists(teardownClaimKey(this.options.keys, jobId))) === 1) continue;
      // Users are named by job id alone, whatever the namespace: one whose agent heart-beats
      // serves someone (another namespace's warm pool member, whose record this reaper cannot see).
      if (verdicts[i] !== 'orphan' && !(await this.isOrphan(jobId, { heartbeatKeeps: true }))) continue;
      if (!(await this.aclUserIsOurs(acl, jobId))) continue;
      await acl.delete(jobId);
      // A user left behind means its destroy was lost, and with it the cleanup of what it stored.
      await this.freeStored(jobId);
      report.aclUsersDeleted++;
    }
  }

  /**
   * What an orphaned sandbox stored, in every database (its footprint), paced like the reaper's
   * other walks; its events stream is the job's output and stays for retention.
   */
  private async freeStored(jobId: string): Promise<void> {
    const { redis, keys } = this.options;
    await freeSandboxFootprint(redis, keys, jobId, { keepOutput: true, ...this.scanPace() });
  }

  private scanPace(): { count: number; pauseMs: number } {
    return { count: this.options.scanCount ?? 200, pauseMs: this.options.pauseMs ?? 10 };
  }
}

interface OrphanCheck {
  /** Only a job whose record is here can be orphaned (a sandbox trusted by name alone). */
  recordRequired?: boolean;
  /** A job id whose agent heart-beats is never orphaned, record or not. */
  heartbeatKeeps?: boolean;
}

/** Index entries read per ZRANGEBYSCORE page. */
const INDEX_PAGE = 500;
/** Due jobs an indexed pass handles concurrently. */
const JOBS_AT_ONCE = 20;

/** How long past retention a `pending` log archive keeps a finished job's keys, unless configured. */
export const DEFAULT_ARCHIVE_HOLD_MS = 86_400_000;

/** Compiled globs: a pass tests every sandbox, user and index entry against the same one. */
const globPatterns = new Map<string, RegExp>();

/** Redis-style glob with only `*` (job ids contain no other glob characters). */
export function matchesGlob(value: string, glob: string): boolean {
  if (glob === '*') return true;
  let compiled = globPatterns.get(glob);
  if (!compiled) {
    const pattern = glob
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*');
    compiled = new RegExp(`^${pattern}$`);
    globPatterns.set(glob, compiled);
  }
  return compiled.test(value);
}
