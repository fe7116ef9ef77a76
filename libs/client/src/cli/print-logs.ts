import { once } from 'node:events';
import { type JobRecord, JobSpecSchema, natsUrlOptions } from '@sandstream/bus';
import { connect, type NatsConnection } from 'nats';
import type { SandstreamClient } from '../client.js';
import { eventsStreamHolding } from '../events-stream-holding.js';
import { decodeFollowEntries, type FollowItem } from '../follow-entry.js';
import { JobNotFoundError } from '../job-not-found.js';
import { readArchive, type StreamEntry } from '../log-archive.js';
import { TimelineGaps } from '../timeline-gaps.js';
import { describeOutput, type RenderTarget, type TextSink, TimelineRenderer } from './render.js';

export interface LogArchiveConfig {
  /** The archive's NATS; none: Redis is the only source. */
  natsUrl?: string | undefined;
  /** The services' NATS_SUBJECT_PREFIX. */
  subjectPrefix?: string | undefined;
}

/** Stream entries read per XRANGE page, and printed between two flushes of the output. */
const PAGE = 1000;

function isEmitter(sink: TextSink): sink is TextSink & NodeJS.EventEmitter {
  return typeof (sink as { once?: unknown }).once === 'function';
}

/**
 * Collects what is written and hands it to stdout / stderr in one write per run of one stream: a
 * million-line log written line by line spends most of its time in write calls. A switch from one
 * stream to the other writes what is pending first, so a terminal shows them in order as before.
 */
class BatchedOutput {
  private readonly pending: string[] = [];
  private current: TextSink | undefined;
  readonly sinks: RenderTarget;

  constructor(target: RenderTarget) {
    const sink = (stream: TextSink): TextSink => ({
      write: (text: string) => this.add(stream, text),
      ...(stream.isTTY === undefined ? {} : { isTTY: stream.isTTY }),
    });
    this.sinks = { out: sink(target.out), err: sink(target.err) };
  }

  private add(stream: TextSink, text: string): void {
    if (stream !== this.current) this.write();
    this.current = stream;
    this.pending.push(text);
  }

  private write(): boolean {
    if (!this.current || this.pending.length === 0) return true;
    const ok = this.current.write(this.pending.join(''));
    this.pending.length = 0;
    return ok !== false;
  }

  /** Writes what is pending, then waits while the stream's buffer is full (a slow pipe, a pager). */
  async flush(): Promise<void> {
    const stream = this.current;
    if (!this.write() && stream && isEmitter(stream)) await once(stream, 'drain');
  }
}

/**
 * Renders one job's log entries, whichever source they come from, with the gaps between them
 * (one TimelineGaps across sources: a line missing where the archive ends and Redis takes over
 * is shown too), and the notes on where they came from, in order.
 */
class LogPrinter {
  private readonly output: BatchedOutput;
  private readonly renderer: TimelineRenderer;
  private readonly gaps = new TimelineGaps();
  private lastState: Extract<FollowItem, { type: 'state' }> | undefined;

  constructor(
    target: RenderTarget,
    private readonly record: JobRecord | null,
  ) {
    this.output = new BatchedOutput(target);
    const spec = record ? JobSpecSchema.safeParse(record.spec) : undefined;
    this.renderer = new TimelineRenderer(this.output.sinks, spec?.success ? spec.data : null);
  }

  print([id, fields]: StreamEntry): void {
    for (const decoded of decodeFollowEntries(id, fields))
      for (const item of this.gaps.accept(decoded)) {
        // The state changes are summed up by the final state line, as `logs` always did.
        if (item.type === 'state') this.lastState = item;
        else this.renderer.render(item);
        if (item.type === 'step-completed') {
          for (const line of describeOutput(this.record?.stepResults[item.stepId]))
            this.output.sinks.out.write(`${line}\n`);
        }
      }
  }

  note(line: string): void {
    this.output.sinks.err.write(`sandstream: ${line}\n`);
  }

  flush(): Promise<void> {
    return this.output.flush();
  }

  /** The job's final state: from its record, or from the log when the record is gone. */
  async finish(): Promise<void> {
    const last = this.lastState;
    const state = this.record ?? (last ? { state: last.to, reason: last.reason } : undefined);
    if (state) this.output.sinks.err.write(`● ${state.state}${state.reason ? ` (${state.reason})` : ''}\n`);
    await this.flush();
  }
}

/**
 * `sandstream logs <jobId>`: the job's whole log, from Redis while its events stream holds all
 * of it, else from the JetStream log archive when one is configured (the rest, if the job is
 * still being archived, from Redis after the last archived entry). Says on stderr which source it
 * used whenever an archive is configured, and marks whatever neither source holds.
 */
export async function printLogs(
  client: SandstreamClient,
  jobId: string,
  archive: LogArchiveConfig,
  target: RenderTarget,
): Promise<void> {
  const record = await client.get(jobId);
  const stream = client.keys.sandbox(jobId).events;
  const holding = await eventsStreamHolding(client.redis, stream);
  // Without an archive a job with no record is not found, as before: its log may still linger.
  if (!record && !archive.natsUrl) throw new JobNotFoundError(jobId, false);
  const printer = new LogPrinter(target, record);
  let after: string | undefined;
  let archived = false;
  const natsUrl = archive.natsUrl;
  if (holding !== 'whole' && natsUrl) {
    // Shown without its credentials: a token sits where redactUrl looks for a user name.
    const url = natsUrlOptions(natsUrl).servers;
    // What was printed before a failure part-way: Redis then goes on after it, not from its start.
    const progress: ArchiveProgress = { lastEntryId: undefined };
    const read = await fromArchive(client, jobId, { ...archive, natsUrl }, printer, progress, () =>
      printer.note(`output from the log archive (${url})`),
    ).catch((err: unknown) => {
      printer.note(`cannot read the log archive at ${url}: ${(err as Error).message}`);
      if (progress.lastEntryId === undefined) return undefined;
      return { found: true, complete: false, lastEntryId: progress.lastEntryId };
    });
    archived = read?.found === true;
    if (read?.complete) return printer.finish();
    if (read?.found) {
      after = read.lastEntryId;
      if (holding !== 'gone') printer.note('the rest from Redis');
    } else if (read) printer.note(`the log archive (${url}) holds nothing of job ${jobId}`);
  }
  if (!record && !archived) throw new JobNotFoundError(jobId, false);
  if (!archived) {
    if (archive.natsUrl) printer.note('output from Redis');
    else if (holding === 'trimmed')
      printer.note(
        "Redis no longer holds the start of this job's log and no log archive is configured " +
          '(--nats-url or $NATS_URL); what is missing is marked where it can be told',
      );
  }
  if (holding !== 'gone') await fromRedis(client, stream, after, printer);
  await printer.finish();
}

interface ArchiveProgress {
  lastEntryId: string | undefined;
}

async function fromArchive(
  client: SandstreamClient,
  jobId: string,
  archive: LogArchiveConfig & { natsUrl: string },
  printer: LogPrinter,
  progress: ArchiveProgress,
  announce: () => void,
): Promise<{ found: boolean; complete: boolean; lastEntryId: string | undefined }> {
  // One read, then done: a dropped connection should end it with an error, not wait for NATS.
  // Credentials in the URL (user:password@, token@) go apart: the nats client ignores them there.
  const nats: NatsConnection = await connect({
    ...natsUrlOptions(archive.natsUrl),
    name: 'sandstream-cli',
    timeout: 5_000,
    reconnect: false,
  });
  try {
    const read = readArchive({
      nats,
      namespace: client.keys.namespace,
      prefix: archive.subjectPrefix,
      jobId,
    });
    let announced = false;
    let printed = 0;
    for await (const entry of read) {
      if (!announced) announce();
      announced = true;
      printer.print(entry);
      progress.lastEntryId = entry[0];
      if (++printed % PAGE === 0) await printer.flush();
    }
    if (read.summary.found && !announced) announce();
    await printer.flush();
    // Lines of a loss show as gaps where they were; this says why they are missing for good.
    for (const gap of read.summary.gaps) {
      const lost = gap.lost === null ? 'an unknown number of' : gap.lost.toLocaleString('en-US');
      process.stderr.write(`sandstream: the archive lost ${lost} log entries (${gap.reason})\n`);
    }
    return read.summary;
  } finally {
    await nats.close();
  }
}

async function fromRedis(
  client: SandstreamClient,
  stream: string,
  after: string | undefined,
  printer: LogPrinter,
): Promise<void> {
  let start = after === undefined ? '-' : `(${after}`;
  for (;;) {
    const entries = (await client.redis.xrange(stream, start, '+', 'COUNT', PAGE)) as StreamEntry[];
    for (const entry of entries) printer.print(entry);
    await printer.flush();
    const last = entries[entries.length - 1];
    if (!last || entries.length < PAGE) return;
    start = `(${last[0]}`;
  }
}
