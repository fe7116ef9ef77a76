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
  snapshotFailure,
} from '@sandstream/bus';
import { type SandboxBackend, type SandboxRef, SnapshotCorruptError } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { type Job, UnrecoverableError } from 'bullmq';
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
}

/**
 * The `sandbox-snapshot` queue: capture a live sandbox's files into a snapshot, or restore one
 * into it. Runs here because the backend is here (a Docker capture reads the engine's layers on
 * this host). Capture: record `uploading` (quota reserved) → backend.captureFiles (frozen) →
 * object store → record `ready`; anything failing on the way removes what it made, and a crash
 * leaves an unlisted `uploading` record the reaper deletes after its grace. Failures are
 * `UnrecoverableError`s whose message starts with a code the SDK turns into a typed error.
 */
export function createSnapshotProcessor(deps: SnapshotProcessorDeps) {
  return async (job: Job): Promise<SnapshotRecord | RestoreOutcome> => {
    const parsed = SnapshotRequestSchema.safeParse(job.data);
    if (!parsed.success)
      throw new UnrecoverableError(`failed: bad snapshot request: ${parsed.error.message}`);
    try {
      return parsed.data.op === 'capture'
        ? await capture(deps, parsed.data)
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
  try {
    const started = performance.now();
    const capture = deps.backend.captureFiles.bind(deps.backend);
    const { stored, frozenMs, entries } = await deps.freeze.hold(request.sandboxId, ref, async () => {
      const taken = await capture(ref);
      const put = await objects.put(snapshotId, taken.stream);
      return { stored: put, ...(await taken.done) };
    });
    const record = await deps.records.commit(
      tenant,
      snapshotId,
      { ...stored, entries, frozenMs },
      deps.limits,
    );
    deps.logger.info(
      {
        sandbox: request.sandboxId,
        snapshotId,
        bytes: stored.sizeBytes,
        entries,
        frozenMs,
        ms: Math.round(performance.now() - started),
      },
      'snapshot taken',
    );
    return record;
  } catch (err) {
    await objects.delete(snapshotId).catch(() => {});
    await deps.records.delete(snapshotId, tenant).catch(() => {});
    throw err;
  }
}

async function restore(
  deps: SnapshotProcessorDeps,
  request: Extract<SnapshotRequest, { op: 'restore' }>,
): Promise<RestoreOutcome> {
  const objects = objectsOf(deps);
  const { ref, tenant } = await liveSandbox(deps, request);
  if (!deps.backend.restoreFiles)
    throw snapshotFailure('conflict', `the ${deps.backend.kind} backend restores no snapshots`);
  const snapshot = await deps.records.get(request.snapshotId, tenant);
  if (!snapshot) throw snapshotFailure('not-found', `snapshot ${request.snapshotId} not found`);
  if (snapshot.backend === 'docker' && deps.backend.kind !== 'docker')
    throw snapshotFailure(
      'conflict',
      `snapshot ${request.snapshotId} holds a Docker container layer: it restores on Docker only`,
    );
  if (!snapshot.sha256)
    throw snapshotFailure('corrupt', `snapshot ${request.snapshotId} has no checksum recorded`);
  const bytes = await objects.open(request.snapshotId, {
    sizeBytes: snapshot.sizeBytes,
    sha256: snapshot.sha256,
  });
  const restoreFiles = deps.backend.restoreFiles.bind(deps.backend);
  const done = await deps.freeze.hold(request.sandboxId, ref, () => restoreFiles(ref, bytes));
  deps.logger.info(
    { sandbox: request.sandboxId, snapshotId: request.snapshotId, ...done },
    'snapshot restored',
  );
  return { snapshotId: request.snapshotId, ...done };
}
