import type { ExecResult } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ConnectServerStream } from './e2b-connect-stream.js';
import type { ProcessEvent } from './e2b-process-schemas.js';

/** How often a stream says it is alive when the SDK does not ask (its Keepalive-Ping-Interval). */
const DEFAULT_KEEPALIVE_SECONDS = 50;

/** E2B's end event of one of our results (a command's or a terminal's). */
export function endEvent(result: ExecResult): ProcessEvent {
  if (result.exitCode === null)
    return {
      end: { exitCode: -1, exited: false, status: 'error', error: result.errorMessage ?? 'did not start' },
    };
  return {
    end: {
      exitCode: result.exitCode,
      exited: !result.cancelled,
      status: result.cancelled ? 'signal: killed' : `exit status ${result.exitCode}`,
      ...(result.errorMessage ? { error: result.errorMessage } : {}),
    },
  };
}

/**
 * The answer of process.Process/Start and Connect: process events in the order they were
 * queued (an event may need a Redis round trip first, as a pid does, and output must not pass
 * it), keepalives while quiet, then the end: the result's end event, or the error a timeout or
 * a failure is (a timed-out process is Connect's deadline_exceeded, the SDK's TimeoutError).
 */
export class ProcessEventStream {
  private readonly stream: ConnectServerStream;
  private readonly keepalive: NodeJS.Timeout;
  private sending: Promise<void> = Promise.resolve();

  constructor(request: FastifyRequest, reply: FastifyReply) {
    this.stream = new ConnectServerStream(request, reply);
    const asked = Number(request.headers['keepalive-ping-interval']);
    const seconds = Number.isFinite(asked) && asked > 0 ? asked : DEFAULT_KEEPALIVE_SECONDS;
    this.keepalive = setInterval(() => this.stream.send({ event: { keepalive: {} } }), seconds * 1000);
  }

  /** Aborted when the caller goes away before the end. */
  get gone(): AbortSignal {
    return this.stream.gone.signal;
  }

  queue(event: () => Promise<ProcessEvent> | ProcessEvent): void {
    this.sending = this.sending.then(async () => this.stream.send({ event: await event() }));
  }

  /** After what was queued: the end the result is. */
  async finish(result: ExecResult): Promise<void> {
    await this.sending;
    clearInterval(this.keepalive);
    if (result.timedOut) {
      this.stream.end({
        code: 'deadline_exceeded',
        message: `the process timed out after ${result.durationMs} ms`,
      });
      return;
    }
    this.stream.send({ event: endEvent(result) });
    this.stream.end();
  }

  /** After what was queued (as far as it went): the error. */
  async fail(err: unknown): Promise<void> {
    await this.sending.catch(() => {});
    clearInterval(this.keepalive);
    this.stream.fail(err);
  }

  /** Ends the stream without an end event: the caller stopped following. */
  close(): void {
    clearInterval(this.keepalive);
    this.stream.end();
  }
}
