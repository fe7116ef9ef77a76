import { createHash } from 'node:crypto';
import type { RedisClient } from './redis-connection.js';

type Arg = string | number;

/** What a script file holds: its source (includes inlined) and how many keys it takes. */
export interface LuaSource {
  source: string;
  numberOfKeys: number;
}

/**
 * A Lua script run by EVALSHA, falling back to EVAL once when the server does not know it yet
 * (fresh server, SCRIPT FLUSH, failover). Works the same on a single node and on a Cluster:
 * ioredis routes both commands by the first key. Scripts come from `.lua` files through
 * lua-loader.ts; the file name declares how many keys the script takes, and a call with another
 * number fails here rather than inside Redis with a confusing nil key.
 *
 * The source is read on first use, not when the module defining the script is imported: importing
 * a package reads no file, and a process reads only the scripts it runs, each once.
 */
export class LuaScript {
  private resolved: (LuaSource & { sha: string }) | undefined;
  private readonly read: () => LuaSource;

  constructor(name: string, read: () => LuaSource);
  constructor(name: string, source: string, numberOfKeys: number);
  constructor(
    readonly name: string,
    read: (() => LuaSource) | string,
    numberOfKeys = 0,
  ) {
    this.read = typeof read === 'string' ? () => ({ source: read, numberOfKeys }) : read;
  }

  /** Whether the source has been read yet. */
  get loaded(): boolean {
    return this.resolved !== undefined;
  }

  get source(): string {
    return this.resolve().source;
  }

  get numberOfKeys(): number {
    return this.resolve().numberOfKeys;
  }

  get sha(): string {
    return this.resolve().sha;
  }

  async run<T = unknown>(redis: RedisClient, keys: readonly string[], args: readonly Arg[]): Promise<T> {
    const { source, numberOfKeys, sha } = this.resolve();
    if (keys.length !== numberOfKeys) {
      throw new Error(`Lua script ${this.name} takes ${numberOfKeys} keys, got ${keys.length}`);
    }
    try {
      return (await redis.evalsha(sha, keys.length, ...keys, ...args)) as T;
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err;
      return (await redis.eval(source, keys.length, ...keys, ...args)) as T;
    }
  }

  private resolve(): LuaSource & { sha: string } {
    if (!this.resolved) {
      const { source, numberOfKeys } = this.read();
      this.resolved = { source, numberOfKeys, sha: createHash('sha1').update(source).digest('hex') };
    }
    return this.resolved;
  }
}
