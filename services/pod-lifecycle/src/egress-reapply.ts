import type { JobStore } from '@sandstream/bus';
import type { SandboxBackend } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { allowEntries, describeEgress, type Egress, egressOf } from '@sandstream/wire';

export interface EgressReapplyDeps {
  backend: SandboxBackend;
  store: JobStore;
  /** The template's policy (network-ceiling.ts): what a sandbox runs under when its spec keeps it. */
  ceiling(template: string | undefined): Egress | undefined;
  /** A warm pool member's id -> the job that claimed it (the pools' claims hash, inverted). */
  claimedBy?: () => Promise<Map<string, string>>;
  logger: Logger;
}

/**
 * Re-applies, once at start, the policy of every running sandbox whose allow-list names domains:
 * the egress proxy's ports and its address -> names map lived in the previous process, so until
 * then such a sandbox's 80/443 are redirected to ports nothing listens on (closed, never open).
 * Errors are logged per sandbox and never end the service. Returns how many were re-applied.
 */
export async function reapplyEgress(deps: EgressReapplyDeps): Promise<number> {
  const { backend, store, logger } = deps;
  if (!backend.updateNetwork) return 0;
  let sandboxes: Awaited<ReturnType<SandboxBackend['list']>>;
  let claimedBy: Map<string, string>;
  try {
    sandboxes = await backend.list();
    claimedBy = (await deps.claimedBy?.()) ?? new Map();
  } catch (err) {
    logger.error({ err: (err as Error).message }, 'egress policies not re-applied: sandboxes not listed');
    return 0;
  }
  let done = 0;
  for (const info of sandboxes) {
    if (info.state !== 'running' || !info.jobId) continue;
    const sandboxId = claimedBy.get(info.jobId) ?? info.jobId;
    try {
      const record = await store.get(sandboxId);
      // Only the job this very container runs (a record of another backend or container is not ours).
      if (
        record?.state !== 'running' ||
        record.sandbox?.backend !== backend.kind ||
        record.sandbox.id !== info.id
      )
        continue;
      const egress = await effectiveEgress(store, sandboxId, deps.ceiling);
      if (egress === undefined || !allowEntries(egress).some((e) => e.kind === 'domain')) continue;
      const network = { egress };
      await backend.updateNetwork({ jobId: info.jobId, backend: info.backend, id: info.id }, network);
      done++;
      logger.info({ sandbox: sandboxId, egress: describeEgress(egress) }, 'egress policy re-applied');
    } catch (err) {
      logger.error({ sandbox: sandboxId, err: (err as Error).message }, 'egress policy not re-applied');
    }
  }
  return done;
}

/**
 * The policy the job runs under, as the scheduler resolved it (template-resolver.ts): a live
 * sandbox's own allow-list or `none` (set at create or by a network update), else its template's.
 */
async function effectiveEgress(
  store: JobStore,
  jobId: string,
  ceiling: EgressReapplyDeps['ceiling'],
): Promise<Egress | undefined> {
  const spec = await store.getSpec(jobId);
  if (!spec) return undefined;
  const own = 'network' in spec && spec.network !== undefined ? egressOf(spec.network) : undefined;
  if (own === 'none' || (own !== undefined && typeof own !== 'string')) return own;
  return ceiling(spec.template);
}
