import { randomBytes } from 'node:crypto';
import {
  type AgentAnnouncements,
  type KeySpace,
  type PoolMember,
  type RedisClient,
  type SandboxAcl,
  tearDownSandbox,
  urlWithCredentials,
  type WarmPoolStore,
} from '@sandstream/bus';
import { type DeclaredPool, type SandboxBackend, SandboxLabels } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';

export interface PoolMembersDeps {
  store: WarmPoolStore;
  redis: RedisClient;
  keys: KeySpace;
  backend: SandboxBackend;
  acl: SandboxAcl | null;
  announcements: AgentAnnouncements;
  /** Redis as the agent reaches it, without credentials. */
  agentRedisUrl: string;
  agentEnv?: Record<string, string>;
  installation: string;
  /** This Redis's installation id (InstallationIdentity), put on every member beside the name. */
  installationId?: () => string;
  /** This replica, written on the members it starts (logs, debugging). */
  owner: string;
  logger: Logger;
  /** A member became ready this long after its place was taken. */
  onRefilled?: (pool: string, seconds: number) => void;
}

/**
 * Member ids are job-id shaped (backends and ACL patterns take them as such), never reused, and
 * start with the namespace like the job ids of a test run, so a reaper scoped to a run's jobs
 * sees its members too.
 */
export function newMemberId(namespace: string, pool: string): string {
  return `${namespace}-pool-${pool.slice(0, 40)}-${randomBytes(6).toString('hex')}`;
}

/**
 * Starting and retiring warm pool members. A member's place is taken first (WarmPoolStore.reserve,
 * within max and capacity); its sandbox is then made like a job's, but its agent waits for a
 * claim as the member's own Redis user. Every step re-checks the record, so a member retired
 * meanwhile (deadline, resize, reaper) is destroyed by whoever finds it gone, and never becomes
 * claimable.
 */
export class PoolMembers {
  constructor(private readonly deps: PoolMembersDeps) {}

  /** Takes a place in `pool` for a new member; null when the pool or the capacity is full. */
  async reserve(pool: DeclaredPool, specHash: string, capacity: number): Promise<PoolMember | null> {
    const now = Date.now();
    const member: PoolMember = {
      id: newMemberId(this.deps.keys.namespace, pool.name),
      pool: pool.name,
      specHash,
      tenants: pool.tenants,
      state: 'starting',
      createdAt: now,
      readyBy: now + pool.spec.startDeadlineSeconds * 1000,
      owner: this.deps.owner,
    };
    const outcome = await this.deps.store.reserve(member, { max: pool.max, capacity });
    return outcome === 'reserved' ? member : null;
  }

  /** Makes the reserved member's sandbox and waits until its agent waits for a claim. */
  async start(pool: DeclaredPool, reserved: PoolMember): Promise<boolean> {
    const { deps } = this;
    const log = deps.logger.child({ pool: pool.name, member: reserved.id });
    let member = reserved;
    const announcement = deps.announcements.expect(member.id);
    try {
      let credentials: Awaited<ReturnType<SandboxAcl['createPoolMember']>> | undefined;
      if (deps.acl) {
        credentials = await deps.acl.createPoolMember(member.id);
        member = { ...member, passwordHash: credentials.passwordHash };
        if (!(await deps.store.update(member, 'starting'))) return this.abandon(member, log);
      }
      const ref = await deps.backend.create({
        jobId: member.id,
        tenant: `pool:${pool.name}`,
        spec: {
          ...pool.spec,
          labels: {
            ...pool.spec.labels,
            [SandboxLabels.installation]: deps.installation,
            ...(deps.installationId ? { [SandboxLabels.installationId]: deps.installationId() } : {}),
            [SandboxLabels.warmPool]: pool.name,
          },
        },
        agent: {
          redisUrl: urlWithCredentials(deps.agentRedisUrl, credentials),
          keyStyle: 'tagged',
          awaitClaim: true,
          ...(deps.agentEnv ? { agentEnv: deps.agentEnv } : {}),
        },
      });
      member = { ...member, ref: { backend: ref.backend, id: ref.id } };
      if (!(await deps.store.update(member, 'starting'))) return this.abandon(member, log);
      const heartbeat = deps.keys.sandbox(member.id).heartbeat;
      const isAgentAlive = async () => (await deps.redis.exists(heartbeat)) === 1;
      await deps.backend.waitReady(ref, Math.max(member.readyBy - Date.now(), 1), {
        isAgentAlive,
        agentAnnounced: async (timeoutMs) => (await announcement.next(timeoutMs)) || (await isAgentAlive()),
      });
      if (!(await deps.store.markReady(member))) return this.abandon(member, log);
      deps.onRefilled?.(pool.name, (Date.now() - member.createdAt) / 1000);
      log.info({ seconds: (Date.now() - member.createdAt) / 1000 }, 'warm pool member ready');
      return true;
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'warm pool member did not start; it is replaced');
      await this.retire(member, 'did not start');
      return false;
    } finally {
      announcement.close();
    }
  }

  /**
   * Forgets a member (only in `expected` state when given) and destroys its sandbox and user.
   * Idempotent; false when the member was not in that state (someone claimed it first).
   */
  async retire(member: PoolMember, why: string, expected?: PoolMember['state']): Promise<boolean> {
    const removed = await this.deps.store.remove(member, expected);
    if (!removed && expected !== undefined) return false;
    await this.destroy(removed ?? member);
    this.deps.logger.info({ pool: member.pool, member: member.id, why }, 'warm pool member retired');
    return true;
  }

  /** Destroys a member's sandbox and Redis user (its record already gone). */
  async destroy(member: PoolMember): Promise<void> {
    const { deps } = this;
    // An idle member has nothing to flush: no grace, and no output to keep.
    await tearDownSandbox(deps, {
      jobId: member.id,
      ref: member.ref ? { jobId: member.id, ...member.ref } : undefined,
      graceMs: 0,
      keepOutput: false,
    }).catch((err: Error) =>
      deps.logger.warn({ member: member.id, err: err.message }, 'warm pool member not destroyed'),
    );
  }

  /** The member was retired while this replica was starting it: what was made goes. */
  private async abandon(member: PoolMember, log: Logger): Promise<false> {
    log.info('warm pool member retired while it started; destroying it');
    await this.destroy(member);
    return false;
  }
}
