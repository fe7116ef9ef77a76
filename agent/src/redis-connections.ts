import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.js';

/**
 * The agent's Redis connections. Blocking pops hold a connection for seconds at a time, so they
 * get their own sockets: one for `:in`, one for `:control` (so a cancel is seen within a
 * fraction of a second even while a step runs), and one for every write (events, results,
 * heartbeat), which therefore never waits behind a BRPOP.
 *
 * Only the writer connects at once: the first heartbeat goes out on it, and that is what a
 * sandbox's start waits for. The two popping connections connect on their first command (both
 * pop only after the first heartbeat), so their handshakes are not part of the boot (issue 18).
 */
export interface AgentConnections {
  readonly steps: Redis;
  readonly control: Redis;
  readonly writer: Redis;
}

/** A connection that breaks sooner than this after it came up did not really come up. */
const FLAP_MS = 1000;

/** Reconnect delay: 50 ms doubling to a 2 s cap, forever; the idle and shutdown logic decide when to give up. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(50 * 2 ** Math.min(attempt - 1, 10), 2000);
}

export function connectionOptions(name: string, lazyConnect = false): RedisOptions {
  return {
    connectionName: name,
    lazyConnect,
    // null: a command waits for the reconnect instead of failing after N retries, so a result
    // written while Redis is away is delivered once it is back.
    maxRetriesPerRequest: null,
    retryStrategy: reconnectDelayMs,
    // Resend commands that were in flight when the socket died (a BRPOP waiting for a step).
    autoResendUnfulfilledCommands: true,
    enableOfflineQueue: true,
    // Don't run INFO before commands: a restricted ACL user may not be allowed to.
    enableReadyCheck: false,
  };
}

export function openConnections(redisUrl: string, jobId: string, log: Logger): AgentConnections {
  const open = (role: string, lazy = false) => {
    // Connections that broke within a second of coming up count as failed attempts too. Without
    // this, a Redis that accepts the socket and then refuses our user (after a restart, before
    // pod-lifecycle re-creates it) has each attempt "succeed", which resets ioredis's count, and
    // every agent would reconnect every 50 ms for as long as the refusal lasts.
    let flaps = 0;
    let readyAt = 0;
    const client = new Redis(redisUrl, {
      ...connectionOptions(`sandstream-agent:${jobId}:${role}`, lazy),
      retryStrategy: (attempt: number) => reconnectDelayMs(attempt + flaps),
    });
    client.on('ready', () => {
      readyAt = Date.now();
    });
    client.on('close', () => {
      flaps = readyAt !== 0 && Date.now() - readyAt < FLAP_MS ? flaps + 1 : 0;
      readyAt = 0;
    });
    let wasDown = false;
    client.on('error', (err: Error) => {
      // ioredis emits an error per failed attempt; the retry strategy handles it, so only log it.
      log.debug('redis connection error', { role, error: err.message });
    });
    client.on('close', () => {
      if (!wasDown && !closing.has(client)) log.warn('redis connection lost, reconnecting', { role });
      wasDown = true;
    });
    client.on('ready', () => {
      if (wasDown) log.info('redis connection restored', { role });
      wasDown = false;
    });
    return client;
  };
  // The writer first: its socket is the one the boot waits for.
  const writer = open('writer');
  return { steps: open('steps', true), control: open('control', true), writer };
}

/** Connections we close on purpose, so their 'close' is not reported as a lost connection. */
const closing = new WeakSet<Redis>();

/** Closes a connection even if a blocking command is pending on it (QUIT would wait for it). */
export function closeNow(client: Redis): void {
  closing.add(client);
  client.disconnect(false);
}

/** Closes a connection after its pending replies (QUIT), falling back to closeNow. */
export async function closeGracefully(client: Redis): Promise<void> {
  closing.add(client);
  await client.quit().catch(() => closeNow(client));
}
