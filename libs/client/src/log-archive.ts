import {
  type ArchiveGap,
  ArchiveHeaders,
  type ArchiveMessage,
  ArchiveMessageSchema,
  compareEntryIds,
  DEFAULT_LOG_ARCHIVE_PREFIX,
  logArchiveNames,
} from '@sandstream/bus';
import { formatIssues } from '@sandstream/wire';
import { type JsMsg, type NatsConnection, NatsError } from 'nats';

/** A Redis stream entry: its id and its flat field list. */
export type StreamEntry = [id: string, fields: string[]];

export interface ReadArchiveOptions {
  nats: NatsConnection;
  namespace: string;
  /** First subject token (the services' NATS_SUBJECT_PREFIX); default `sandstream`. */
  prefix?: string | undefined;
  jobId: string;
  signal?: AbortSignal | undefined;
}

/** What a read found, known once its entries have been iterated. */
export interface ArchiveReadSummary {
  /** The archive has a stream for the namespace and at least one message for the job. */
  found: boolean;
  /** The archiver's complete marker was read: nothing of the job's log is left to archive. */
  complete: boolean;
  /** The last entry id yielded: a reader continuing in Redis starts after it. */
  lastEntryId: string | undefined;
  /** Losses the archiver recorded (entries trimmed from Redis before it archived them). */
  gaps: ArchiveGap[];
}

export interface ArchiveRead extends AsyncIterable<StreamEntry> {
  readonly summary: ArchiveReadSummary;
}

/** How long one pull waits for the server; the read ends on `pending` reaching 0 long before. */
const PULL_EXPIRES_MS = 5_000;
/**
 * Ends a read that receives nothing for this long: messages counted before the consumer started
 * can age out of the archive meanwhile, and `pending` would then never be seen reaching 0.
 */
const IDLE_MS = 10_000;

function isStreamNotFound(err: unknown): boolean {
  // JetStream's API error code for "stream not found".
  return (
    err instanceof NatsError && (err.api_error?.err_code === 10059 || err.message === 'stream not found')
  );
}

/**
 * Reads a job's log from the JetStream archive, in order, through an ordered consumer filtered
 * to the job's subject. The archiver publishes at least once (JetStream de-duplicates within its
 * window only), so an entry id at or below the last one yielded is skipped. Ends at the complete
 * marker, or when the consumer has nothing pending (a job still being archived: the rest is in
 * Redis, after `summary.lastEntryId`). A namespace with no archive stream yields nothing.
 */
export function readArchive(options: ReadArchiveOptions): ArchiveRead {
  const summary: ArchiveReadSummary = { found: false, complete: false, lastEntryId: undefined, gaps: [] };
  return {
    summary,
    [Symbol.asyncIterator]: () => entries(options, summary),
  };
}

async function* entries(
  options: ReadArchiveOptions,
  summary: ArchiveReadSummary,
): AsyncGenerator<StreamEntry, void, undefined> {
  const names = logArchiveNames({
    prefix: options.prefix ?? DEFAULT_LOG_ARCHIVE_PREFIX,
    namespace: options.namespace,
  });
  const subject = names.subject(options.jobId);
  let count: number;
  try {
    // Asked first because a consumer over nothing would wait for the job's first message.
    const info = await (await options.nats.jetstreamManager()).streams.info(names.stream, {
      subjects_filter: subject,
    });
    count = info.state.subjects?.[subject] ?? 0;
  } catch (err) {
    if (isStreamNotFound(err)) return;
    throw err;
  }
  if (count === 0) return;
  summary.found = true;
  const consumer = await options.nats.jetstream().consumers.get(names.stream, { filterSubjects: subject });
  const messages = await consumer.consume({ max_messages: 100, expires: PULL_EXPIRES_MS });
  const stop = () => messages.stop();
  options.signal?.addEventListener('abort', stop, { once: true });
  // Armed only while waiting for the server: a reader paused by a slow consumer (a pager) is not idle.
  let idle = setTimeout(stop, IDLE_MS);
  try {
    for await (const message of messages) {
      clearTimeout(idle);
      const body = decodeMessage(message);
      if (body.gap) summary.gaps.push(body.gap);
      for (const entry of body.entries) {
        if (summary.lastEntryId !== undefined && compareEntryIds(entry[0], summary.lastEntryId) <= 0)
          continue;
        summary.lastEntryId = entry[0];
        yield entry;
      }
      if (body.complete || message.headers?.get(ArchiveHeaders.complete) === '1') {
        summary.complete = true;
        break;
      }
      if (message.info.pending === 0) break;
      idle = setTimeout(stop, IDLE_MS);
    }
  } finally {
    clearTimeout(idle);
    options.signal?.removeEventListener('abort', stop);
    messages.stop();
    // The ordered consumer is ephemeral; deleting it now spares the server its inactivity timer.
    await consumer.delete().catch(() => {});
  }
}

function decodeMessage(message: JsMsg): ArchiveMessage {
  const where = `log archive message ${message.info.streamSequence} on ${message.subject}`;
  let data: unknown;
  try {
    data = message.json();
  } catch (err) {
    throw new Error(`${where} is not JSON: ${(err as Error).message}`);
  }
  const parsed = ArchiveMessageSchema.safeParse(data);
  if (!parsed.success)
    throw new Error(`${where} is not in the archive format: ${formatIssues(parsed.error)}`);
  return parsed.data;
}
