import {
  type JobStore,
  NetworkUpdateRequestSchema,
  networkFailure,
  parseNetworkFailure,
} from '@sandstream/bus';
import type { SandboxBackend } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { describeEgress, type Egress, type NetworkPolicy, refusedEgressUpdate } from '@sandstream/wire';
import { type Job, UnrecoverableError } from 'bullmq';

export interface NetworkProcessorDeps {
  store: JobStore;
  backend: SandboxBackend;
  /**
   * The policy the sandbox's template sets (the ceiling an update may not widen): the templates
   * file's when this service has one, else `internet` (the default) for a sandbox of no template.
   */
  ceiling(template: string | undefined): Egress | undefined;
  logger: Logger;
}

/**
 * The `sandbox-network` queue: replace a running sandbox's egress policy through its backend
 * (Docker rewrites its iptables chain, Kubernetes replaces its NetworkPolicy), then keep it on its spec so a resume gets it. Failures
 * are `UnrecoverableError`s whose message starts with a code (network-requests.ts).
 */
export function createNetworkProcessor(deps: NetworkProcessorDeps) {
  return async (job: Job): Promise<NetworkPolicy> => {
    const parsed = NetworkUpdateRequestSchema.safeParse(job.data);
    if (!parsed.success) throw new UnrecoverableError(`failed: bad network request: ${parsed.error.message}`);
    const request = parsed.data;
    try {
      const record = await deps.store.get(request.sandboxId);
      if (record?.kind !== 'sandbox' || (request.tenant && record.tenant !== request.tenant))
        throw networkFailure('not-found', `sandbox ${request.sandboxId} not found`);
      if (record.state !== 'running' || !record.sandbox)
        throw networkFailure('conflict', `sandbox ${request.sandboxId} is ${record.state}, not running`);
      const { backend, id, member } = record.sandbox;
      if (backend !== deps.backend.kind)
        throw networkFailure(
          'conflict',
          `sandbox ${request.sandboxId} runs on ${backend}, this service on ${deps.backend.kind}`,
        );
      if (!deps.backend.updateNetwork)
        throw networkFailure(
          'unsupported',
          `the ${backend} backend cannot enforce an egress policy (its sandboxes share this machine's network), so it cannot change one`,
        );
      const unenforceable = deps.backend.egressRefusal?.(request.network.egress, 'network');
      if (unenforceable) throw networkFailure('unsupported', unenforceable);
      const spec = await deps.store.getSpec(request.sandboxId);
      const refused = refusedEgressUpdate(deps.ceiling(spec?.template), request.network.egress);
      if (refused) throw networkFailure('refused', refused);
      const started = performance.now();
      await deps.backend.updateNetwork({ jobId: member ?? request.sandboxId, backend, id }, request.network);
      await deps.store.setSandboxNetwork(request.sandboxId, request.network);
      deps.logger.info(
        {
          sandbox: request.sandboxId,
          egress: describeEgress(request.network.egress),
          ms: Math.round(performance.now() - started),
        },
        'sandbox network changed',
      );
      return request.network;
    } catch (err) {
      const message = (err as Error).message;
      const known = parseNetworkFailure(message);
      throw new UnrecoverableError(
        message.startsWith(`${known.code}: `) ? message : networkFailure('failed', message).message,
      );
    }
  };
}
