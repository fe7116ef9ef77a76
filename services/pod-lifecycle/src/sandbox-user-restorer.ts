import {
  type KeySpace,
  type PoolMember,
  type RedisClient,
  readSandboxUser,
  type SandboxAcl,
} from '@sandstream/bus';
import { PeriodicTask } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';

export interface SandboxUserRestorerOptions {
  redis: RedisClient;
  keys: KeySpace;
  acl: SandboxAcl;
  /** The warm pool members (WarmPoolStore), when pools are declared: their users are restored too. */
  poolMembers?: { all(): Promise<PoolMember[]>; get(memberId: string): Promise<PoolMember | null> };
  logger: Logger;
  /** Safety net between reconnects (a restart this replica's connection did not notice). */
  intervalMs: number;
  onProgress?: () => void;
}

/**
 * Re-creates the Redis users of live sandboxes after Redis lost them. ACL users are not part of
 * the AOF, so a Redis restart — even one that kept every key — locks every running agent out
 * (WRONGPASS) until its user is back. pod-lifecycle owns the users (it creates and deletes them),
 * so it restores them, from the password hash kept in each job record:
 *
 * - at its start (Redis may have restarted while pod-lifecycle was down),
 * - when its connection becomes ready again after a drop (the moment a restart is noticed), and
 * - every `intervalMs`, in case a restart went unnoticed or a pass failed halfway.
 *
 * A pass reads the `starting` and `running` job indexes, lists the existing users once, and
 * issues `ACL SETUSER … #<hash>` for each live job whose user is missing. Warm pool members not
 * yet claimed get theirs back the same way, from the hash kept in their record: their agents
 * wait through the restart and must be able to log in again as themselves. Idempotent, so every
 * replica may run it.
 */
export class SandboxUserRestorer {
  private readonly loop: PeriodicTask;
  private connectedOnce = false;
  private pass: Promise<void> | undefined;
  private readonly onReady = () => {
    // The first 'ready' is the service's own start: nothing can have been lost yet.
    if (!this.connectedOnce) {
      this.connectedOnce = true;
      return;
    }
    this.runSoon();
  };

  constructor(private readonly options: SandboxUserRestorerOptions) {
    this.loop = new PeriodicTask(() => this.restoreMissing().then(() => undefined), options.intervalMs, {
      name: 'sandbox user restore',
      logger: options.logger,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  }

  start(): void {
    this.connectedOnce = this.options.redis.status === 'ready';
    this.options.redis.on('ready', this.onReady);
    this.loop.start();
    this.runSoon();
  }

  /** One pass now, retried a few times (the reconnect may be followed by LOADING or errors). */
  private runSoon(): void {
    if (this.pass) return;
    this.pass = (async () => {
      for (let attempt = 0; attempt < 10; attempt++) {
        try {
          await this.restoreMissing();
          return;
        } catch (err) {
          if (attempt === 0)
            this.options.logger.warn(
              { err: (err as Error).message },
              'restoring sandbox users failed; retrying',
            );
          await new Promise((r) => setTimeout(r, 500 * (attempt + 1)));
        }
      }
    })().finally(() => {
      this.pass = undefined;
    });
  }

  /** Returns how many users were re-created. */
  async restoreMissing(): Promise<number> {
    const { redis, keys, acl, logger } = this.options;
    const [starting, running, existing] = await Promise.all([
      redis.zrange(keys.jobsByState('starting'), 0, -1),
      redis.zrange(keys.jobsByState('running'), 0, -1),
      acl.listJobIds(),
    ]);
    const present = new Set(existing);
    const missing = [...new Set([...starting, ...running])].filter((id) => !present.has(id));
    let restored = 0;
    for (const jobId of missing) {
      const kept = await readSandboxUser(redis, keys, jobId);
      if (!kept) continue;
      await acl.restore(jobId, kept.notifyStream, kept.passwordHash);
      restored++;
    }
    const members = await this.restorePoolMembers(present);
    if (restored + members > 0) {
      logger.info({ restored, poolMembers: members }, 're-created sandbox Redis users that Redis had lost');
    }
    return restored + members;
  }

  /** Unclaimed members with a kept hash and no user; `present` lists the users there. */
  private async restorePoolMembers(present: Set<string>): Promise<number> {
    const { poolMembers, acl } = this.options;
    if (!poolMembers) return 0;
    let restored = 0;
    for (const member of await poolMembers.all()) {
      if (member.state === 'claimed' || !member.passwordHash || present.has(member.id)) continue;
      await acl.restorePoolMember(member.id, member.passwordHash);
      // Retired meanwhile (record removed, then user deleted, between our read and the SETUSER):
      // the user just made would outlive it. A claimed member keeps its record, and its user
      // until its claim is bound (WarmStart deletes it then).
      if ((await poolMembers.get(member.id)) === null) await acl.delete(member.id);
      restored++;
    }
    return restored;
  }

  async stop(): Promise<void> {
    this.options.redis.off('ready', this.onReady);
    await this.loop.stop();
    await this.pass;
  }
}
