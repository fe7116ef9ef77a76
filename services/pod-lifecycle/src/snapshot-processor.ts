import type { Readable } from 'node:stream';
import {
  type JobStore,
  type RestoreOutcome,
  SnapshotIntegrityError,
  SnapshotLimitError,
  type SnapshotLimits,
  type SnapshotRecord,
  type SnapshotRecords,
  type SnapshotRequest,
  SnapshotRequestSchema,
  type SnapshotStore,
  type StoredSnapshot,
  snapshotFailure,
} from '@sandstream/bus';
import {
  encodeCopiedTrees,
  type SandboxBackend,
  type SandboxRef,
  SnapshotCorruptError,
} from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { type Job, UnrecoverableError } from 'bullmq';
import type { CaptureCache, SpooledCapture } from './capture-cache.js';
import type { ForkSnapshotDrops } from './fork-snapshot-drops.js';
import { openSnapshot } from './open-snapshot.js';
import type { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';

export interface SnapshotProcessorDeps {
  store: JobStore;
  backend: SandboxBackend;
  records: SnapshotRecords;
  /** Undefined without NATS_URL: every request is refused, saying so. */
  objects: SnapshotStore | undefined;
  limits: SnapshotLimits;
  logger: Logger;
  /** Holds each capture's and restore's freeze lease (snapshot-freeze-guard.ts). */
  freeze: SnapshotFreezeGuard;
  /** Keeps captures on this node for forks placed here (absent: captures stream to the store). */
  cache?: CaptureCache | undefined;
  /** A fork's capture is also copied as plain trees for the forks placed here (default on). */
  forkCopies?: boolean;
  /**
   * Drops a fork's temporary snapshot once its forks hold their files (fork-snapshot-drops.ts);
   * absent, it lasts until its record expires (one upload grace) and the reaper takes it.
   */
  forkDrops?: ForkSnapshotDrops | undefined;
}

/**
 * The `sandbox-snapshot` queue: capture a live sandbox's files into a snapshot, or restore one
 * into it. Runs here because the backend is here (a Docker capture reads the engine's layers on
 * this host). Capture: record `uploading` (quota reserved) → backend.captureFiles (frozen) →
 * object store → record `ready`; anything failing on the way removes what it made, and a crash
 * leaves an unlisted `uploading` record the reaper deletes after its grace. A fork's capture
 * (`forks`) is temporary: committed unlisted, then dropped here once the forks hold their files. Failures are
 * `UnrecoverableError`s whose message starts with a code the SDK turns into a typed error.
 */
export function createSnapshotProcessor(deps: SnapshotProcessorDeps) {
  return async (job: Job): Promise<SnapshotRecord | RestoreOutcome> => {
    const parsed = SnapshotRequestSchema.safeParse(job.data);
    if (!parsed.success)
      throw new UnrecoverableError(`failed: bad snapshot request: ${parsed.error.message}`);
    try {
      return parsed.data.op === 'capture'
        ? await capture(deps, parsed.data, job)
        : await restore(deps, parsed.data);
    } catch (err) {
      throw new UnrecoverableError(failureMessage(err as Error));
    }
  };
}

function failureMessage(err: Error): string {
  if (/^(not-found|limit:count|limit:bytes|corrupt|conflict|failed): /.test(err.message)) return err.message;
  if (err instanceof SnapshotLimitError) return snapshotFailure(`limit:${err.limit}`, err.message).message;
  if (err instanceof SnapshotCorruptError || err instanceof SnapshotIntegrityError)
    return snapshotFailure('corrupt', err.message).message;
  return snapshotFailure('failed', err.message).message;
}

/** A spooled capture into the store; what the store hashed must be what the spool hashed. */
async function uploadSpooled(
  objects: SnapshotStore,
  snapshotId: string,
  spooled: SpooledCapture,
): Promise<StoredSnapshot> {
  const stored = await objects.put(snapshotId, spooled.read());
  if (stored.sizeBytes !== spooled.sizeBytes || stored.sha256 !== spooled.sha256)
    throw new Error(
      `snapshot ${snapshotId}: the store received ${stored.sizeBytes} bytes hashing to ${stored.sha256}, the capture was ${spooled.sizeBytes} bytes hashing to ${spooled.sha256}`,
    );
  return stored;
}

/** The live sandbox the request names, running here, or a not-found / conflict failure. */
async function liveSandbox(
  deps: SnapshotProcessorDeps,
  request: SnapshotRequest,
): Promise<{ ref: SandboxRef; tenant: string; spec: Record<string, unknown> }> {
  const record = await deps.store.get(request.sandboxId);
  if (record?.kind !== 'sandbox' || (request.tenant && record.tenant !== request.tenant))
    throw snapshotFailure('not-found', `sandbox ${request.sandboxId} not found`);
  if (record.state !== 'running' || !record.sandbox)
    throw snapshotFailure('conflict', `sandbox ${request.sandboxId} is ${record.state}, not running`);
  const { backend, id, member } = record.sandbox;
  if (backend !== deps.backend.kind)
    throw snapshotFailure(
      'conflict',
      `sandbox ${request.sandboxId} runs on ${backend}, this service on ${deps.backend.kind}`,
    );
  return {
    ref: { jobId: member ?? request.sandboxId, backend, id },
    tenant: record.tenant,
    spec: record.spec as unknown as Record<string, unknown>,
  };
}

function objectsOf(deps: SnapshotProcessorDeps): SnapshotStore {
  if (!deps.objects)
    throw snapshotFailure(
      'failed',
      'snapshots are off: pod-lifecycle has no NATS_URL (their bytes live in JetStream)',
    );
  return deps.objects;
}

async function capture(
  deps: SnapshotProcessorDeps,
  request: Extract<SnapshotRequest, { op: 'capture' }>,
  job: Pick<Job, 'timestamp' | 'processedOn'>,
): Promise<SnapshotRecord> {
  const objects = objectsOf(deps);
  const { ref, tenant, spec } = await liveSandbox(deps, request);
  if (!deps.backend.captureFiles)
    throw snapshotFailure('conflict', `the ${deps.backend.kind} backend takes no snapshots`);
  const { snapshotId } = request;
  await deps.records.begin(
    {
      snapshotId,
      tenant,
      ...(request.name ? { name: request.name } : {}),
      fromSandbox: request.sandboxId,
      spec,
      backend: deps.backend.kind,
      createdAt: Date.now(),
    },
    deps.limits,
  );
  let spooled: SpooledCapture | undefined;
  try {
    const started = performance.now();
    const capture = deps.backend.captureFiles.bind(deps.backend);
    const { cache } = deps;
    let frozenAt = started;
    let copiedMs: number | undefined;
    // A fork's capture, where the backend copies trees: the sandbox is frozen for a plain copy
    // only, forks placed here restore from that copy, and the snapshot's stream is encoded from
    // it once the sandbox runs again, straight into the store (local-copies.ts): no spool, whose
    // write, hash and read back cost the forks' CPU, and which the copy stands in for here.
    const copied =
      request.forFork && cache && deps.forkCopies !== false
        ? await copyForForks(deps, cache, request.sandboxId, ref, snapshotId, request.forks?.length ?? 0)
        : undefined;
    if (copied) copiedMs = Math.round(performance.now() - started);
    const frozen = copied
      ? {
          frozenMs: copied.frozenMs,
          entries: copied.entries,
          stored: await objects.put(snapshotId, copied.stream),
        }
      : await deps.freeze.hold<{
          frozenMs: number;
          entries: number;
          spooled?: SpooledCapture;
          stored?: StoredSnapshot;
        }>(request.sandboxId, ref, async () => {
          frozenAt = performance.now();
          const taken = await capture(ref);
          // With a local cache the sandbox is frozen only while its files are read into the spool,
          // not while they travel to the store; without one they stream to the store as they are read.
          if (cache) return { spooled: await cache.spool(snapshotId, taken.stream), ...(await taken.done) };
          return { stored: await objects.put(snapshotId, taken.stream), ...(await taken.done) };
        });
    const thawedAt = performance.now();
    const { frozenMs, entries } = frozen;
    spooled = frozen.spooled;
    // Offered to forks placed here at once: they restore from it while it uploads.
    await spooled
      ?.keep()
      .catch((err) =>
        deps.logger.warn({ snapshotId, err: (err as Error).message }, 'capture not kept in the local cache'),
      );
    const stored = frozen.stored ?? (spooled && (await uploadSpooled(objects, snapshotId, spooled)));
    if (!stored) throw new Error(`snapshot ${snapshotId}: the capture was neither stored nor spooled`);
    const uploaded = performance.now();
    const record = await deps.records.commit(
      tenant,
      snapshotId,
      { ...stored, entries, frozenMs },
      deps.limits,
      { temporary: request.forks !== undefined },
    );
    // A fork's snapshot: its caller does not wait for this answer once the forks run; the
    // snapshot goes here, once they hold their files, whatever became of the caller.
    if (request.forks) deps.forkDrops?.schedule(tenant, snapshotId, request.forks);
    deps.logger.info(
      {
        sandbox: request.sandboxId,
        snapshotId,
        bytes: stored.sizeBytes,
        entries,
        frozenMs,
        ms: Math.round(performance.now() - started),
        // Phases: up to the freeze (lease), frozen capture + gzip (+ upload without a cache, or
        // after a fork's copy), the upload from the local spool (with a cache), commit.
        leaseMs: Math.round(frozenAt - started),
        captureMs: Math.round(thawedAt - frozenAt),
        uploadMs: Math.round(uploaded - thawedAt),
        commitMs: Math.round(performance.now() - uploaded),
        // A fork's plain copy (frozen), before the stream was encoded from it into the spool.
        copiedMs,
        // From the request's enqueue to this worker's pick-up: the queue hop.
        queuedMs: job.processedOn ? job.processedOn - job.timestamp : undefined,
      },
      'snapshot taken',
    );
    return record;
  } catch (err) {
    await spooled?.discard().catch(() => {});
    await deps.cache?.copies.forget(snapshotId).catch(() => {});
    await objects.delete(snapshotId).catch(() => {});
    await deps.records.delete(snapshotId, tenant).catch(() => {});
    throw err;
  }
}

/**
 * How long at most a fork's upload waits, in all, for the forks restoring from its copy here: a
 * fork placed on another node waits for the upload, so at most this much longer.
 */
const FORK_UPLOAD_YIELD_MS = 2000;

/**
 * The sandbox's files copied for forks placed here (backend.copyFiles, under the freeze lease)
 * and the snapshot's stream to encode from that copy; undefined where the backend copies nothing
 * or the copy failed (logged): the capture then reads the sandbox as any other.
 */
async function copyForForks(
  deps: SnapshotProcessorDeps,
  cache: CaptureCache,
  sandboxId: string,
  ref: SandboxRef,
  snapshotId: string,
  forks: number,
): Promise<{ frozenMs: number; entries: number; stream: Readable } | undefined> {
  const { backend } = deps;
  if (!backend.copyFiles || !backend.restoreCopy) return undefined;
  const copyFiles = backend.copyFiles.bind(backend);
  try {
    const made = await deps.freeze.hold(sandboxId, ref, () =>
      cache.copies.make(snapshotId, (into) => copyFiles(ref, into)),
    );
    const yieldUntil = Date.now() + FORK_UPLOAD_YIELD_MS;
    return {
      frozenMs: made.result.frozenMs,
      entries: made.listing.entries,
      // The upload yields to the forks restoring from the copy here (LocalCopies.unused): its
      // encode and hashes took the CPU their start needed. Bounded, for forks placed elsewhere.
      stream: encodeCopiedTrees(made.dir, made.result.parts, {
        beforeEntry: () => cache.copies.unused(snapshotId, yieldUntil, forks),
      }),
    };
  } catch (err) {
    deps.logger.warn(
      { sandbox: sandboxId, snapshotId, err: (err as Error).message },
      "a fork's capture was not copied for forks here: read as any capture",
    );
    return undefined;
  }
}

async function restore(
  deps: SnapshotProcessorDeps,
  request: Extract<SnapshotRequest, { op: 'restore' }>,
): Promise<RestoreOutcome> {
  const { ref, tenant } = await liveSandbox(deps, request);
  if (!deps.backend.restoreFiles)
    throw snapshotFailure('conflict', `the ${deps.backend.kind} backend restores no snapshots`);
  const bytes = await openSnapshot(deps, request.snapshotId, tenant);
  const restoreFiles = deps.backend.restoreFiles.bind(deps.backend);
  const done = await deps.freeze.hold(request.sandboxId, ref, () => restoreFiles(ref, bytes));
  deps.logger.info(
    { sandbox: request.sandboxId, snapshotId: request.snapshotId, ...done },
    'snapshot restored',
  );
  return { snapshotId: request.snapshotId, ...done };
}
