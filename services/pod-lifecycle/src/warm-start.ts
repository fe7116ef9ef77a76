import {
  type AgentAnnouncements,
  type KeySpace,
  type PoolMember,
  type RedisClient,
  type SandboxAcl,
  saveSandboxUser,
  type WarmPoolStore,
} from '@sandstream/bus';
import type { SandboxRef, SandboxSpec } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import type { PoolClaimInput, TraceContext } from '@sandstream/wire';
import type { PoolSource } from './pool-keeper.js';
import type { PoolMembers } from './pool-members.js';
import { fitToPool, poolSpecHash } from './pool-spec.js';

export interface WarmStartDeps {
  source: PoolSource;
  store: WarmPoolStore;
  members: PoolMembers;
  redis: RedisClient;
  keys: KeySpace;
  acl: SandboxAcl | null;
  announcements: AgentAnnouncements;
  logger: Logger;
  /** How long a claimed member has to come up as the job before the start goes cold. */
  bindTimeoutMs: number;
  onHit?: (pool: string, seconds: number) => void;
  onMiss?: (pool: string, reason: string) => void;
}

export interface WarmRequest {
  jobId: string;
  tenant: string;
  spec: SandboxSpec;
  live: boolean;
  notifyStream: string;
  traceContext?: TraceContext;
}

export type WarmOutcome =
  | {
      kind: 'hit';
      ref: SandboxRef;
      member: PoolMember;
      /**
       * Settles once the member's agent runs as the job (true) or did not within the timeout
       * (false; the member is then destroyed). The caller may go on meanwhile: steps pushed
       * before the agent bound wait in the job's list.
       */
      bound: Promise<boolean>;
    }
  | { kind: 'miss'; reason: string };

/**
 * The warm half of a start: when the request names a template with a pool and asks for nothing
 * a running member cannot take on, one ready member is claimed (atomically, in Redis) and bound to
 * the job — its Redis user becomes the job's (same password, the job's keys), and its agent is
 * told the job id, notify stream, idleness and command env. Anything else is a miss with its
 * reason, and the caller starts cold.
 */
export class WarmStart {
  constructor(private readonly deps: WarmStartDeps) {}

  async tryClaim(request: WarmRequest): Promise<WarmOutcome> {
    const name = request.spec.template;
    if (name === undefined) return { kind: 'miss', reason: 'no-template' };
    const pool = this.deps.source.pools().find((p) => p.name === name);
    if (!pool) return { kind: 'miss', reason: 'no-pool' };
    const miss = (reason: string): WarmOutcome => {
      this.deps.onMiss?.(name, reason.split(':')[0] as string);
      return { kind: 'miss', reason };
    };
    const fit = fitToPool(pool.spec, request.spec);
    if (!fit.fits) return miss(fit.reason);
    const started = Date.now();
    const claimed = await this.deps.store.claim({
      pool: name,
      specHash: poolSpecHash(pool),
      jobId: request.jobId,
      tenant: request.tenant,
      now: started,
    });
    if (claimed.kind === 'tenant') return miss('tenant-not-allowed');
    if (claimed.kind === 'claimed-before') {
      // A redelivered start whose first attempt claimed (and may have bound) a member: that
      // sandbox could already run as this job, so it goes before a cold one is made for it.
      const earlier = await this.deps.store.get(claimed.memberId);
      if (earlier) await this.deps.members.retire(earlier, 'its start was redelivered');
      return miss('claimed-before');
    }
    if (claimed.kind !== 'hit') return miss(claimed.kind);
    const { member } = claimed;
    const heartbeat = this.deps.keys.sandbox(member.id).heartbeat;
    // A member whose agent died since the keeper last looked goes now, while the start can still go cold.
    if (
      !member.ref ||
      (this.deps.acl && !member.passwordHash) ||
      !(await this.deps.redis.exists(heartbeat))
    ) {
      await this.deps.members.retire(member, 'claimed, but not alive');
      return miss('member-unresponsive');
    }
    const bound = this.handOver(request, member, fit.env, fit.unsetEnv, started);
    await bound.pushed;
    const confirmed = bound.confirmed.then(async (ok) => {
      if (ok) this.deps.onHit?.(name, (Date.now() - started) / 1000);
      else await this.deps.members.retire(member, 'did not come up as the claiming job');
      return ok;
    });
    return { kind: 'hit', member, ref: { jobId: member.id, ...member.ref }, bound: confirmed };
  }

  /**
   * Hands the member its job: the job's Redis user, then the claim on the member's list
   * (`pushed`); `confirmed` once its agent announced itself under the job's id.
   */
  private handOver(
    request: WarmRequest,
    member: PoolMember,
    env: Record<string, string>,
    unsetEnv: string[],
    claimedAt: number,
  ): { pushed: Promise<void>; confirmed: Promise<boolean> } {
    const { deps } = this;
    const { jobId } = request;
    // Listening before the claim is pushed, so the agent cannot announce itself unheard.
    const announcement = deps.announcements.expect(jobId);
    const pushed = (async () => {
      let username: string | undefined;
      if (deps.acl && member.passwordHash) {
        username = await deps.acl.createForClaim(jobId, request.notifyStream, member.passwordHash);
        await saveSandboxUser(deps.redis, deps.keys, jobId, {
          username,
          notifyStream: request.notifyStream,
          passwordHash: member.passwordHash,
        });
      }
      const claim: PoolClaimInput = {
        jobId,
        notifyStream: request.notifyStream,
        live: request.live,
        env,
        unsetEnv,
        claimedAt,
        ...(username ? { username } : {}),
        ...(request.traceContext ? { traceContext: request.traceContext } : {}),
      };
      await deps.redis.lpush(deps.keys.sandbox(member.id).claim, JSON.stringify(claim));
    })();
    const confirmed = pushed
      .then(async () => {
        const heartbeat = deps.keys.sandbox(jobId).heartbeat;
        const deadline = Date.now() + deps.bindTimeoutMs;
        let bound = false;
        while (!bound && Date.now() < deadline) {
          bound =
            (await announcement.next(Math.min(deadline - Date.now(), 250))) ||
            (await deps.redis.exists(heartbeat)) === 1;
        }
        if (!bound) return false;
        // The member's own user has served its purpose; the sandbox now runs as the job's.
        if (deps.acl) await deps.acl.delete(member.id).catch(() => undefined);
        deps.logger.info({ jobId, member: member.id, pool: member.pool }, 'claimed a warm pool member');
        return true;
      })
      .catch(() => false)
      .finally(() => announcement.close());
    return { pushed, confirmed };
  }
}
