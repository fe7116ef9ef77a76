import { createHash } from 'node:crypto';
import type { RedisClient } from './redis-connection.js';

type Arg = string | number;

/**
 * A Lua script run by EVALSHA, falling back to EVAL once when the server does not know it yet
 * (fresh server, SCRIPT FLUSH, failover). Works the same on a single node and on a Cluster:
 * ioredis routes both commands by the first key. Scripts come from `.lua` files through
 * lua-loader.ts; the file name declares how many keys the script takes, and a call with another
 * number fails here rather than inside Redis with a confusing nil key.
 */
export class LuaScript {
  readonly sha: string;
  constructor(
    readonly name: string,
    readonly source: string,
    readonly numberOfKeys: number,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run<T = unknown>(redis: RedisClient, keys: readonly string[], args: readonly Arg[]): Promise<T> {
    if (keys.length !== this.numberOfKeys) {
      throw new Error(`Lua script ${this.name} takes ${this.numberOfKeys} keys, got ${keys.length}`);
    }
    try {
      return (await redis.evalsha(this.sha, keys.length, ...keys, ...args)) as T;
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err;
      return (await redis.eval(this.source, keys.length, ...keys, ...args)) as T;
    }
  }
}
