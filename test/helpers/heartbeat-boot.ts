import { type ChildProcess, spawn } from 'node:child_process';
import { childPids, processRunTimeMs, type RedisServer, startRedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';

/**
 * A private redis-server that tells the moment a sandbox's heartbeat key is first SET, for the
 * boot benchmarks: keyspace notifications (K$: every string command), so nothing polls and the
 * time measured is the boot's, not a poll interval's.
 */
export class HeartbeatWatch {
  private readonly waiters = new Map<string, () => void>();

  private constructor(
    readonly server: RedisServer,
    readonly redis: Redis,
    private readonly subscriber: Redis,
  ) {
    subscriber.on('pmessage', (_pattern, channel: string, event: string) => {
      if (event === 'set') this.waiters.get(channel.slice('__keyspace@0__:'.length))?.();
    });
  }

  static async start(): Promise<HeartbeatWatch> {
    const server = await startRedisServer({ args: ['--notify-keyspace-events', 'K$'] });
    const subscriber = new Redis(server.url);
    await subscriber.psubscribe('__keyspace@0__:sandbox:*:heartbeat');
    return new HeartbeatWatch(server, new Redis(server.url), subscriber);
  }

  /**
   * Starts `argv` and resolves once it SETs `key`: the wall time to that SET and the CPU the
   * process and its children (the agent's spawner helper) used until then. The child is left
   * running; `stopChild` ends it.
   */
  async boot(
    argv: readonly string[],
    key: string,
    env?: NodeJS.ProcessEnv,
  ): Promise<{ child: ChildProcess; ms: number; cpuMs: number; exited: Promise<never> }> {
    const seen = new Promise<void>((resolve) => this.waiters.set(key, resolve));
    const started = performance.now();
    const child = spawn(argv[0] as string, argv.slice(1), {
      stdio: 'ignore',
      cwd: '/tmp',
      ...(env ? { env } : {}),
    });
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code) => reject(new Error(`${argv.join(' ')} exited (${code}) early`))),
    );
    exited.catch(() => {});
    try {
      await Promise.race([seen, exited]);
    } catch (err) {
      await stopChild(child);
      throw err;
    } finally {
      this.waiters.delete(key);
    }
    const ms = performance.now() - started;
    const pid = child.pid as number;
    const cpuMs = [pid, ...childPids(pid)].reduce((sum, p) => sum + processRunTimeMs(p), 0);
    return { child, ms, cpuMs, exited };
  }

  async close(): Promise<void> {
    await this.subscriber.quit();
    await this.redis.quit();
    await this.server.stop();
  }
}

/** SIGTERM, and wait for the exit; a child already gone is left as it is. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await gone;
}
