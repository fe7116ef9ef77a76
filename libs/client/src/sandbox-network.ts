import { type NetworkPolicy, NetworkPolicySchema } from '@sandstream/wire';
import type { z } from 'zod';
import { parseOptions } from './client-options.js';
import type { SandboxTransport } from './transport.js';

export type NetworkPolicyInput = z.input<typeof NetworkPolicySchema>;

/**
 * Where a running sandbox may connect to (sandbox.network; docs/sandbox-backends.md, "Egress
 * rules"). The policy is enforced by the platform (on Docker its iptables chain), never by the
 * sandbox, and may only narrow what its template allows.
 */
export class SandboxNetwork {
  constructor(
    private readonly id: string,
    private readonly transport: SandboxTransport,
  ) {}

  /**
   * Replaces the egress policy: new connections follow it once this returns (ones already open
   * stay). Answers the policy applied. Not running, wider than its template, or a backend that
   * cannot enforce one (in-process): SandboxConflictError; bad input: SandstreamOptionsError.
   */
  async update(policy: NetworkPolicyInput): Promise<NetworkPolicy> {
    return this.transport.updateNetwork(this.id, parseOptions(NetworkPolicySchema, policy, 'network'));
  }
}
