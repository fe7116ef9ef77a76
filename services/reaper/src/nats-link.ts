import { natsUrlOptions } from '@sandstream/bus';
import { sleep } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import { type ConnectionOptions, connect, type NatsConnection } from 'nats';

export interface NatsLinkOptions {
  url: string;
  /** The client name the server shows. */
  name: string;
  logger: Logger;
  /** Pause between two reconnect attempts of one connection (nats.js reconnectTimeWait; default 2000). */
  reconnectWaitMs?: number;
  /** First pause before building a new connection after one failed or closed; doubles up to maxRebuildWaitMs. */
  rebuildWaitMs?: number;
  maxRebuildWaitMs?: number;
  /** Further nats.js options (tests lower the ping interval here). */
  connectOptions?: Partial<ConnectionOptions>;
}

/** Where the relay and the archiver get their NATS connection: always the current one. */
export interface NatsSource {
  /** The current connection; waits (abortably) while there is none, e.g. NATS down at start-up. */
  connection(signal: AbortSignal): Promise<NatsConnection>;
}

/** A source that is one fixed connection (tests that do not kill NATS). */
export function fixedNats(nats: NatsConnection): NatsSource {
  return { connection: async () => nats };
}

/**
 * One NATS connection that never gives up. nats.js stops reconnecting after
 * maxReconnectAttempts (default 10 × 2 s: a 20 s outage closed the connection for good, and
 * with it the lifecycle relay and the log archive until a restart); here it retries forever
 * (maxReconnectAttempts -1), an initial connect that fails is retried with backoff, and should a
 * connection close anyway (the server refused it, a protocol error), a new one is built.
 * Whoever uses it asks for `connection()` on each attempt, so no one holds a dead connection.
 */
export class NatsLink implements NatsSource {
  private readonly controller = new AbortController();
  private current: NatsConnection | undefined;
  private waiters: (() => void)[] = [];
  private loop: Promise<void> | undefined;
  private loopEnded = false;
  /** The current connection's last status: between a disconnect and its reconnect, false. */
  private up = false;
  /** Connections built so far (1 after the first connect): tests and logs. */
  built = 0;

  constructor(private readonly options: NatsLinkOptions) {}

  start(): void {
    this.loop ??= this.supervise().finally(() => {
      this.loopEnded = true;
    });
  }

  /** Connected right now (false while reconnecting or before the first connect). */
  isConnected(): boolean {
    const nc = this.current;
    return nc !== undefined && !nc.isClosed() && this.up;
  }

  /**
   * False once nothing will bring NATS back: the supervising loop ended without being asked to.
   * A NATS that is merely down is not that (the link reconnects when it returns).
   */
  isRecoverable(): boolean {
    return this.controller.signal.aborted || !this.loopEnded;
  }

  async connection(signal: AbortSignal): Promise<NatsConnection> {
    for (;;) {
      const nc = this.current;
      if (nc && !nc.isClosed()) return nc;
      if (signal.aborted || this.controller.signal.aborted) throw new Error('NATS link stopped');
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.waiters.push(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  /** Drains the current connection (what was published reaches the server) and stops rebuilding. */
  async close(): Promise<void> {
    this.controller.abort();
    this.wake();
    // The loop waits on the connection's end: drained first, then the loop sees the abort.
    const nc = this.current;
    if (nc && !nc.isClosed()) await nc.drain().catch(() => nc.close());
    await this.loop;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private async supervise(): Promise<void> {
    const { logger } = this.options;
    const signal = this.controller.signal;
    const firstWait = this.options.rebuildWaitMs ?? 1000;
    let wait = firstWait;
    let failures = 0;
    while (!signal.aborted) {
      let nc: NatsConnection;
      try {
        nc = await connect({
          ...natsUrlOptions(this.options.url),
          name: this.options.name,
          // Forever, with backoff: an outage of any length ends in a reconnect, not a closed client.
          maxReconnectAttempts: -1,
          reconnectTimeWait: this.options.reconnectWaitMs ?? 2000,
          reconnectJitter: 500,
          ...this.options.connectOptions,
        });
      } catch (err) {
        if (failures++ === 0)
          logger.warn({ err: (err as Error).message }, 'NATS unreachable; retrying with backoff');
        await sleep(wait, signal);
        wait = Math.min(wait * 2, this.options.maxRebuildWaitMs ?? 30_000);
        continue;
      }
      if (signal.aborted) {
        await nc.close();
        break;
      }
      this.current = nc;
      this.up = true;
      this.built++;
      if (failures > 0 || this.built > 1) logger.info({ connections: this.built }, 'NATS connected again');
      failures = 0;
      wait = firstWait;
      this.wake();
      void this.logStatus(nc);
      const closedWith = await nc.closed();
      if (signal.aborted) break;
      // Closed although it never gives up reconnecting: a fatal error. A new client starts clean.
      logger.warn(
        { err: closedWith instanceof Error ? closedWith.message : undefined },
        'NATS connection closed; building a new one',
      );
      await sleep(wait, signal);
    }
  }

  /** One line when the connection drops and one when it is back, not one per attempt. */
  private async logStatus(nc: NatsConnection): Promise<void> {
    const { logger } = this.options;
    let down = false;
    for await (const status of nc.status()) {
      if (this.current !== nc) break;
      if (status.type === 'disconnect') {
        this.up = false;
        if (!down) logger.warn('NATS disconnected; reconnecting (no attempt limit)');
        down = true;
      } else if (status.type === 'reconnect') {
        this.up = true;
        if (down) logger.info('NATS reconnected');
        down = false;
      }
    }
  }
}
