import { type JobState, type PoolMember, tearDownSandbox, type WarmPoolStore } from '@sandstream/bus';
import { type SandboxInfo, SandboxLabels } from '@sandstream/sandbox';
import { type DestroyDeps, destroySandbox } from './destroy-sandbox.js';

export interface RunTeardownDeps extends DestroyDeps {
  /** Only sandboxes labelled with this installation are swept from the backend. */
  installation: string;
  /** This Redis's installation ids (InstallationIdentity.known): a sandbox must carry one of them. */
  installationIds: ReadonlySet<string>;
  pools: WarmPoolStore;
  /** Destroys at once (default 16). */
  concurrency?: number;
}

export interface RunTeardownReport {
  /** Jobs and live sandboxes that were starting or running, ended `cancelled`, sandbox destroyed. */
  jobsEnded: number;
  /** Warm pool members forgotten and destroyed. */
  poolMembers: number;
  /** Sandboxes of this installation no record led to (a create cut short, a destroy still queued). */
  unrecorded: number;
  /** Destroys that failed (each logged). */
  failed: number;
}

/** States in which a job holds, or is being given, a sandbox. Queued and scheduled ones keep. */
const HOLDING: readonly JobState[] = ['starting', 'running'];

/**
 * Ends a run of the services: every sandbox the run made is destroyed, from what Redis says and
 * from what the backend holds, so nothing outlives it. For `npm start` (scripts/start.mjs), which
 * runs it after its services have stopped (or were killed): the run owns its installation, and
 * no service process is left to make a sandbox after the backend was read. Never run by a
 * service's own shutdown: a production pod-lifecycle restarting must leave the deployment's
 * sandboxes alone (docs/services.md, "Ending a run").
 *
 * 1. Jobs `starting` or `running` (live sandboxes are jobs): the normal destroy, with outcome
 *    `cancelled` and `reason`; queued and scheduled jobs stay for the next run.
 * 2. Warm pool members: record, sandbox and Redis user.
 * 3. Whatever the backend still lists with this installation's label: destroyed without a record.
 */
export async function tearDownRun(deps: RunTeardownDeps, reason: string): Promise<RunTeardownReport> {
  const report: RunTeardownReport = { jobsEnded: 0, poolMembers: 0, unrecorded: 0, failed: 0 };
  const attempt = async (what: Record<string, unknown>, run: () => Promise<void>): Promise<boolean> => {
    try {
      await run();
      return true;
    } catch (err) {
      report.failed++;
      deps.logger.warn({ ...what, err: (err as Error).message }, 'run teardown: not destroyed');
      return false;
    }
  };
  const limit = deps.concurrency ?? 16;

  const seen = new Set<string>();
  for (;;) {
    // Each round takes what the indexes still hold; ended jobs leave them, so this terminates.
    const lists = await Promise.all(HOLDING.map((state) => deps.store.list({ state, limit: 1000 })));
    const fresh = lists.flat().filter((job) => !seen.has(job.id));
    if (fresh.length === 0) break;
    for (const job of fresh) seen.add(job.id);
    await inParallel(fresh, limit, async (job) => {
      const ok = await attempt({ jobId: job.id }, () =>
        destroySandbox(deps, { jobId: job.id, reason, outcome: 'cancelled' }),
      );
      if (ok) report.jobsEnded++;
    });
  }

  await inParallel(await deps.pools.all(), limit, async (member: PoolMember) => {
    const ok = await attempt({ member: member.id }, async () => {
      await deps.pools.remove(member);
      await tearDownSandbox(deps, {
        jobId: member.id,
        ref: member.ref ? { jobId: member.id, ...member.ref } : undefined,
        graceMs: 0,
        keepOutput: false,
      });
    });
    if (ok) report.poolMembers++;
  });

  const left = (await deps.backend.list()).filter(
    (sandbox) =>
      sandbox.labels[SandboxLabels.installation] === deps.installation &&
      deps.installationIds.has(sandbox.labels[SandboxLabels.installationId] ?? ''),
  );
  await inParallel(left, limit, async (sandbox: SandboxInfo) => {
    const member = sandbox.labels[SandboxLabels.warmPool] !== undefined;
    const ok = await attempt({ jobId: sandbox.jobId, sandbox: sandbox.id }, async () => {
      await tearDownSandbox(deps, { jobId: sandbox.jobId, ref: sandbox, graceMs: 0, keepOutput: !member });
    });
    if (ok) report.unrecorded++;
  });
  return report;
}

async function inParallel<T>(
  items: readonly T[],
  limit: number,
  run: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await run(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
