import { JobIdSchema, NetworkPolicySchema } from '@sandstream/wire';
import { z } from 'zod';
import type { KeySpace } from './key-space.js';
import { codedFailures, QueuedRequests } from './queued-requests.js';
import { QueueNames } from './queues.js';
import type { RedisClient } from './redis-connection.js';

/**
 * A running sandbox's egress policy changes where its backend is (pod-lifecycle holds the
 * firewall): the SDK queues the request on `sandbox-network` and waits for the answer, as
 * snapshots do (snapshot-requests.ts). `tenant` is the caller's: another tenant's sandbox is
 * answered as not found.
 */
export const NetworkUpdateRequestSchema = z.strictObject({
  sandboxId: JobIdSchema,
  tenant: z.string().min(1).optional(),
  network: NetworkPolicySchema,
});
export type NetworkUpdateRequest = z.infer<typeof NetworkUpdateRequestSchema>;

/**
 * Why an update failed, as the processor's error message starts (`<code>: <message>`):
 * `not-found`, `conflict` (not running, another backend), `unsupported` (the backend cannot
 * enforce a policy), `refused` (wider than its template allows), `failed`.
 */
export const NetworkFailureCodes = ['not-found', 'conflict', 'unsupported', 'refused', 'failed'] as const;
export type NetworkFailureCode = (typeof NetworkFailureCodes)[number];

const networkFailures = codedFailures(NetworkFailureCodes);
export const networkFailure = networkFailures.failure;
export const parseNetworkFailure = networkFailures.parse;

/** The SDK's side: queue an update, wait for pod-lifecycle's answer (the policy applied). */
export class NetworkUpdateRequests {
  private readonly requests: QueuedRequests;

  constructor(connection: RedisClient, keys: KeySpace) {
    this.requests = new QueuedRequests(connection, keys, QueueNames.sandboxNetwork);
  }

  async update(request: NetworkUpdateRequest, timeoutMs: number) {
    const answer = await this.requests.send('update', NetworkUpdateRequestSchema.parse(request), timeoutMs);
    return NetworkPolicySchema.parse(answer);
  }

  close(): Promise<void> {
    return this.requests.close();
  }
}
