import type { ApiContext } from '../api-context.js';
import { HttpProblem } from '../problem.js';

/**
 * E2B names a command by a numeric pid; ours by a command id. Each command started through the
 * E2B API gets the next number of its sandbox, kept in Redis both ways (every replica answers
 * any call), for as long as a command may run. A pid also says what it names: a command, or a
 * terminal (E2B's PTY), whose input, resizes and output take other paths.
 */
const PID_TTL_SECONDS = 25 * 3600;
/** A terminal's entry is its command id behind this mark; a command's has none. */
const PTY_MARK = 'pty:';

export type PidKind = 'command' | 'pty';

/** What a pid names. */
export interface PidTarget {
  commandId: string;
  kind: PidKind;
}

function targetOf(value: string): PidTarget {
  return value.startsWith(PTY_MARK)
    ? { commandId: value.slice(PTY_MARK.length), kind: 'pty' }
    : { commandId: value, kind: 'command' };
}

export class E2bPids {
  constructor(private readonly ctx: Pick<ApiContext, 'redis' | 'keys'>) {}

  private key(sandboxId: string, what: string): string {
    return this.ctx.keys.api(`e2b:${what}:${sandboxId}`);
  }

  /** A new pid for `commandId`. */
  async assign(sandboxId: string, commandId: string, kind: PidKind = 'command'): Promise<number> {
    const pid = await this.ctx.redis.incr(this.key(sandboxId, 'next-pid'));
    await this.ctx.redis
      .multi()
      .expire(this.key(sandboxId, 'next-pid'), PID_TTL_SECONDS)
      .hset(this.key(sandboxId, 'pids'), String(pid), kind === 'pty' ? `${PTY_MARK}${commandId}` : commandId)
      .expire(this.key(sandboxId, 'pids'), PID_TTL_SECONDS)
      .exec();
    return pid;
  }

  /** The command or terminal a pid names (404 when it names none). */
  async targetOf(sandboxId: string, pid: number): Promise<PidTarget> {
    const value = await this.ctx.redis.hget(this.key(sandboxId, 'pids'), String(pid));
    if (value === null) throw new HttpProblem(404, 'not-found', `process with pid ${pid} not found`);
    return targetOf(value);
  }

  /** Every pid of the sandbox, by command id. */
  async all(sandboxId: string): Promise<Map<string, number>> {
    const all = await this.ctx.redis.hgetall(this.key(sandboxId, 'pids'));
    return new Map(Object.entries(all).map(([pid, value]) => [targetOf(value).commandId, Number(pid)]));
  }
}
