import type { RawListConnection, SandboxKeys } from '@sandstream/wire';
import { Limits, popTransferChunks, pushTransferChunks, readAhead, transferKey } from '@sandstream/wire/lean';

/**
 * The Redis side of an upload or download: a tar stream in chunks on the transfer's own list
 * (wire transferKey), an empty value at its end (wire transfer-list.ts). Each transfer opens a
 * connection of its own as this sandbox's Redis user (the agent's others are busy blocking on
 * `:in` and `:control`): a RawListConnection, which neither copies a chunk on its way out nor
 * joins one on its way in.
 */
export class TransferChannel {
  constructor(
    private readonly keys: SandboxKeys,
    /** A fresh connection as the agent's own Redis user, closed after the transfer. */
    private readonly connect: () => Promise<RawListConnection>,
  ) {}

  /** The tar stream's chunks until the end marker; throws when the sender stays silent past the idle limit. */
  async *receive(transferId: string, signal: AbortSignal): AsyncGenerator<Buffer> {
    const key = transferKey(this.keys, transferId);
    const redis = await this.connect();
    const abort = () => redis.close();
    signal.addEventListener('abort', abort, { once: true });
    try {
      yield* popTransferChunks(redis, key, {
        timeoutSeconds: Limits.transferIdleSeconds,
        onIdle: async () => {
          throw new Error(`no data for ${Limits.transferIdleSeconds} s: the sender went away`);
        },
      });
    } finally {
      signal.removeEventListener('abort', abort);
      redis.close();
    }
  }

  /** Sends `chunks` (each at most transferChunkBytes, as its pieces), then the end marker. */
  async send(transferId: string, chunks: AsyncIterable<Buffer[]>, signal: AbortSignal): Promise<void> {
    const key = transferKey(this.keys, transferId);
    const redis = await this.connect();
    try {
      const ended = await pushTransferChunks(redis, key, readAhead(chunks), {
        stopped: () => signal.aborted,
        idleSeconds: Limits.transferIdleSeconds,
      });
      if (!ended) throw new Error('cancelled');
    } finally {
      redis.close();
    }
  }
}
