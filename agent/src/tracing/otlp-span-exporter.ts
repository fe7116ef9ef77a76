import { postBody } from './http-post.js';
import { encodeSpans, type FinishedSpan, type SpanAttributeValue } from './otlp-json.js';

export interface OtlpSpanExporterOptions {
  /** Full URL of the traces endpoint, e.g. http://collector:4318/v1/traces. */
  url: string;
  headers?: Record<string, string>;
  resource: Record<string, SpanAttributeValue>;
  /** Spans held while the collector is slow or away; beyond this new spans are dropped (counted). */
  maxQueueSize?: number;
  maxBatchSize?: number;
  /** How long a finished span may wait for company before it is sent. */
  scheduledDelayMs?: number;
  /** Per request; a hung collector must not hold the agent's exit. */
  exportTimeoutMs?: number;
}

/**
 * A small batching OTLP/HTTP JSON span exporter. The agent must stay small and cannot take the
 * OpenTelemetry SDK, and it only ever records a handful of spans per step, so this covers the
 * part of a BatchSpanProcessor that matters here: bounded memory, one request per batch, never
 * blocking or failing the caller, and a bounded flush on exit.
 */
export class OtlpSpanExporter {
  private readonly queue: FinishedSpan[] = [];
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> = Promise.resolve();
  private readonly maxQueueSize: number;
  private readonly maxBatchSize: number;
  private readonly scheduledDelayMs: number;
  private readonly exportTimeoutMs: number;
  /** Spans lost to a full queue or a failed request. */
  dropped = 0;
  exported = 0;

  constructor(private readonly options: OtlpSpanExporterOptions) {
    this.maxQueueSize = options.maxQueueSize ?? 2048;
    this.maxBatchSize = options.maxBatchSize ?? 256;
    this.scheduledDelayMs = options.scheduledDelayMs ?? 1000;
    this.exportTimeoutMs = options.exportTimeoutMs ?? 5000;
  }

  /** Queues a finished span; returns at once. */
  export(span: FinishedSpan): void {
    if (this.queue.length >= this.maxQueueSize) {
      this.dropped += 1;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= this.maxBatchSize) this.sendBatches();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.sendBatches(), this.scheduledDelayMs);
      // A pending export alone must not keep the agent alive; exit paths call flush().
      this.timer.unref();
    }
  }

  /** Sends everything queued and waits for it, at most `timeoutMs`. Never rejects. */
  async flush(timeoutMs = this.exportTimeoutMs): Promise<void> {
    this.sendBatches();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.inFlight,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  private sendBatches(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatchSize);
      // Requests are chained, not parallel: at most one connection to the collector at a time.
      this.inFlight = this.inFlight.then(() => this.send(batch));
    }
  }

  private async send(batch: FinishedSpan[]): Promise<void> {
    try {
      const status = await postBody(
        this.options.url,
        encodeSpans(batch, this.options.resource, { name: 'sandstream-agent' }),
        { 'content-type': 'application/json', ...this.options.headers },
        this.exportTimeoutMs,
      );
      if (status >= 200 && status < 300) this.exported += batch.length;
      else this.dropped += batch.length;
    } catch {
      // Telemetry is best effort: a collector that is down costs spans, never a step.
      this.dropped += batch.length;
    }
  }
}
