import type { LogArchiveNames } from '@sandstream/bus';
import {
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  NatsError,
  nanos,
  RetentionPolicy,
  StorageType,
} from 'nats';
import type { NatsSource } from './nats-link.js';

/** JetStream API error codes. */
export const NO_MESSAGE_FOUND = 10037;
const STREAM_NOT_FOUND = 10059;
export const WRONG_LAST_SEQUENCE = 10071;

export interface JetStreamHandles {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/** The archive's JetStream: the stream and its limits, and handles on the current connection. */
export class ArchiveJetStream {
  /** JetStream handles of the connection they were made on: a rebuilt connection gets new ones. */
  private jet: JetStreamHandles | undefined;

  constructor(
    private readonly options: {
      nats: NatsSource;
      names: LogArchiveNames;
      signal: AbortSignal;
      maxAgeMs?: number;
      maxBytes?: number;
    },
  ) {}

  /**
   * JetStream on the current connection (waiting while there is none). Asked for on each use:
   * a connection closed for good is replaced by nats-link.ts, and a handle on the old one would
   * fail every publish from then on.
   */
  async handles(): Promise<JetStreamHandles> {
    const nc = await this.options.nats.connection(this.options.signal);
    if (this.jet?.nc !== nc) this.jet = { nc, js: nc.jetstream(), jsm: await nc.jetstreamManager() };
    return this.jet;
  }

  /** The archive stream, created or brought to the configured limits. */
  async ensureStream(): Promise<void> {
    const { names } = this.options;
    const { jsm } = await this.handles();
    const limits = {
      max_age: nanos(this.options.maxAgeMs ?? 7 * 86_400_000),
      max_bytes: this.options.maxBytes ?? 10 * 1024 ** 3,
    };
    try {
      const info = await jsm.streams.info(names.stream);
      if (info.config.max_age !== limits.max_age || info.config.max_bytes !== limits.max_bytes) {
        await jsm.streams.update(names.stream, { ...info.config, ...limits });
      }
    } catch (err) {
      if (apiErrorCode(err) !== STREAM_NOT_FOUND) throw err;
      await jsm.streams.add({
        name: names.stream,
        subjects: [names.subjects],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        // A publish retried after a lost acknowledgement is dropped by its Nats-Msg-Id.
        duplicate_window: nanos(120_000),
        ...limits,
      });
    }
  }
}

export function apiErrorCode(err: unknown): number | undefined {
  return err instanceof NatsError ? err.api_error?.err_code : undefined;
}
