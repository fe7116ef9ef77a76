import type { SandboxKeys, TerminalInput, TerminalKeys } from '@sandstream/wire';
import { decodeTerminalInput, StreamLimits, TerminalOutputField, terminalKeys } from '@sandstream/wire/lean';
import type { Redis } from 'ioredis';
import { listInput } from './list-input.js';

/** Output waiting for Redis beyond this is dropped, oldest first (a terminal keeps its latest screen). */
const MAX_PENDING_OUTPUT_BYTES = 4 * 1024 * 1024;
/** One output stream entry carries at most this much (what piled up while the last XADD was out). */
const MAX_ENTRY_BYTES = 256 * 1024;
/** A terminal's keys outlive it this long, so a client that reattaches late still reads the end. */
const KEYS_TTL_SECONDS = 24 * 60 * 60;

/**
 * The Redis side of the sandbox's terminals (wire terminal.ts): input popped from each
 * terminal's list on a connection of its own (BRPOP blocks it), output appended to its stream.
 */
export class TerminalChannel {
  constructor(
    private readonly keys: SandboxKeys,
    /** A fresh connection as the agent's own Redis user; each terminal opens two and closes them. */
    private readonly connect: () => Redis,
  ) {}

  open(terminalId: string): TerminalLink {
    return new TerminalLink(terminalKeys(this.keys, terminalId), this.connect);
  }
}

export class TerminalLink {
  private readonly reader: Redis;
  private readonly writer: Redis;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private droppedBytes = 0;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly keys: TerminalKeys,
    connect: () => Redis,
  ) {
    this.reader = connect();
    this.writer = connect();
  }

  /** Input messages as clients pushed them, until `signal` aborts; survives a Redis restart. */
  async *input(signal: AbortSignal): AsyncGenerator<TerminalInput> {
    for await (const value of listInput(this.reader, this.keys.input, signal)) {
      const message = decodeTerminalInput(value);
      if (message) yield message;
    }
  }

  /** Queues output for the stream. Never blocks: a chunk Redis cannot take in time is dropped. */
  write(chunk: Buffer): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    while (this.pendingBytes > MAX_PENDING_OUTPUT_BYTES && this.pending.length > 1) {
      const dropped = this.pending.shift() as Buffer;
      this.pendingBytes -= dropped.length;
      this.droppedBytes += dropped.length;
    }
    this.flushing ??= this.flush().finally(() => {
      this.flushing = null;
    });
  }

  /** Sends what is queued, then the end entry with the exit code; closes both connections. */
  async end(exitCode: number | null): Promise<void> {
    try {
      while (this.flushing) await this.flushing;
      await this.append(TerminalOutputField.exit, exitCode === null ? '' : String(exitCode))
        .del(this.keys.input)
        .exec();
    } catch {
      // Redis is gone for good: the step's result still says how it ended.
    } finally {
      this.close();
    }
  }

  close(): void {
    this.reader.disconnect();
    this.writer.disconnect();
  }

  /** A transaction that adds one entry to the capped output stream and renews its expiry. */
  private append(field: string, value: string | Buffer) {
    return this.writer
      .multi()
      .xadd(this.keys.output, 'MAXLEN', '~', StreamLimits.terminalOutputMaxLength, '*', field, value)
      .expire(this.keys.output, KEYS_TTL_SECONDS);
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch: Buffer[] = [];
      let bytes = 0;
      if (this.droppedBytes > 0) {
        batch.push(Buffer.from(`\r\n[sandstream: ${this.droppedBytes} bytes of output dropped]\r\n`));
        this.droppedBytes = 0;
      }
      while (
        this.pending.length > 0 &&
        (bytes === 0 || bytes + (this.pending[0] as Buffer).length <= MAX_ENTRY_BYTES)
      ) {
        const chunk = this.pending.shift() as Buffer;
        batch.push(chunk);
        bytes += chunk.length;
      }
      this.pendingBytes -= bytes;
      try {
        await this.append(TerminalOutputField.data, Buffer.concat(batch)).exec();
      } catch {
        this.droppedBytes += bytes;
      }
    }
  }
}
