import { JobField, type JobState, type KeySpace, type RedisClient, TERMINAL_STATES } from '@sandstream/bus';

/** The few fields of a job record that tell whether a reaper pass has anything to do with it. */
export interface JobGlance {
  state: string | null;
  finishedAt: number | undefined;
  updatedAt: number | undefined;
  namespace: string | null;
  pausedFiles: boolean;
}

/** When a job needs nothing from this pass (see needsNoWork). */
export interface GlanceLimits {
  namespace: string;
  now: number;
  retentionMs: number;
  startingTimeoutMs: number;
  heartbeatGraceMs: number;
}

/**
 * The fields of a batch of job records, one HMGET each, sent together: what a pass reads of a job
 * it leaves alone, instead of the whole record parsed (spec, sandbox, results). A reaper pass used
 * to read and parse every retained job every minute: ~0.8 ms of its CPU per finished job per pass
 * (docs/benchmarks.md, issue 32).
 */
export async function glanceJobs(redis: RedisClient, keys: KeySpace, jobIds: string[]): Promise<JobGlance[]> {
  const fields = [
    JobField.state,
    JobField.finishedAt,
    JobField.updatedAt,
    JobField.namespace,
    JobField.pausedFiles,
  ];
  const replies = await Promise.all(jobIds.map((id) => redis.hmget(keys.job(id), ...fields)));
  return replies.map(([state, finishedAt, updatedAt, namespace, pausedFiles]) => ({
    state: state ?? null,
    finishedAt: finishedAt == null ? undefined : Number(finishedAt),
    updatedAt: updatedAt == null ? undefined : Number(updatedAt),
    namespace: namespace ?? null,
    pausedFiles: pausedFiles != null,
  }));
}

/**
 * True when the full pass would do nothing with this job: another namespace's, finished within
 * its retention with no kept files to discard, waiting in the queue, or starting / running for
 * less than the time after which it counts as stuck. Anything else (paused, past retention, a
 * record without the namespace field, or one that vanished) gets the full look, which re-checks
 * everything on the parsed record.
 */
export function needsNoWork(glance: JobGlance, limits: GlanceLimits): boolean {
  const { state } = glance;
  if (state === null) return true; // gone meanwhile
  if (glance.namespace !== null && glance.namespace !== limits.namespace) return true;
  if (glance.namespace === null) return false; // ownership needs the tenant index: full look
  if (TERMINAL_STATES.includes(state as JobState)) {
    return !glance.pausedFiles && (glance.finishedAt ?? 0) > limits.now - limits.retentionMs;
  }
  const age = limits.now - (glance.updatedAt ?? 0);
  if (state === 'queued' || state === 'scheduled') return true;
  if (state === 'starting') return age <= limits.startingTimeoutMs;
  if (state === 'running') return age <= limits.heartbeatGraceMs;
  return false;
}

/**
 * A finished job of this namespace past retention with no kept files: deleted by the delete
 * script alone (it re-checks state, end and namespace), without reading and parsing the record.
 */
export function isDueFinished(glance: JobGlance, limits: GlanceLimits): boolean {
  return (
    glance.namespace === limits.namespace &&
    TERMINAL_STATES.includes(glance.state as JobState) &&
    !glance.pausedFiles &&
    (glance.finishedAt ?? 0) <= limits.now - limits.retentionMs
  );
}

/**
 * What a glance at a sandbox's (or Redis user's) job says, for a sandbox that is no warm pool
 * member: `kept` when its record is there and its job runs, or ended no longer than the sandbox
 * grace ago (its own destroy is still under way); `orphan` when the record is this namespace's
 * and its job ended longer ago than that; `look` for the rest (no record, another namespace's
 * ended job, a record without the namespace field), which get the full check (Reaper.isOrphan).
 * The first two are what that check answers from the parsed record: read in one HMGET sent with
 * the others of the pass instead of a whole record read and parsed per sandbox (per finished
 * job's sandbox at a short grace: docs/benchmarks.md, "The reaper per job", parts 3 and 6).
 */
export function sandboxVerdict(
  glance: JobGlance,
  namespace: string,
  now: number,
  sandboxGraceMs: number,
): 'kept' | 'orphan' | 'look' {
  if (glance.state === null) return 'look';
  if (!TERMINAL_STATES.includes(glance.state as JobState)) return 'kept';
  if (now - (glance.finishedAt ?? glance.updatedAt ?? 0) <= sandboxGraceMs) return 'kept';
  return glance.namespace === namespace ? 'orphan' : 'look';
}
