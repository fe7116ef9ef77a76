import { metrics } from '@opentelemetry/api';
import { OTLPMetricExporter as OTLPJsonMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as OTLPProtoMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { type IMetricReader, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { plannedSpanIdGenerator } from './planned-span.js';
import { type TelemetryConfig, telemetryConfigFromEnv } from './telemetry-config.js';

export interface InitTelemetryOptions {
  /** `service.name` on every span and metric, e.g. `scheduler`. */
  serviceName: string;
  /** Defaults to process.env. The SDK itself still reads OTEL_* from process.env. */
  env?: NodeJS.ProcessEnv;
  /** Upper bound for the flush in shutdown(), so a dead collector cannot stall SIGTERM. */
  shutdownTimeoutMs?: number;
}

export interface Telemetry {
  readonly config: TelemetryConfig;
  /** Flushes pending spans and metrics and stops the Prometheus server. Safe to call twice. */
  shutdown(): Promise<void>;
  /**
   * Collects and exports the metrics now, bounded like shutdown(). A service calls it first
   * when it stops: gauges observed from Redis (queue depth) can be read only while Redis is
   * still open, and shutdown() comes after the connections close.
   */
  flushMetrics(): Promise<void>;
}

let tracing = false;
let metricsOn = false;

/**
 * Whether this process exports spans (initTelemetry turned OTLP on). Lets callers skip work
 * whose only purpose is a span, such as extra Redis reads, when telemetry is off.
 */
export function tracingEnabled(): boolean {
  return tracing;
}

/** Whether any metric reader (OTLP or Prometheus) collects in this process. */
export function metricsEnabled(): boolean {
  return metricsOn;
}

function otlpMetricReader(config: TelemetryConfig): IMetricReader {
  // Same protocol as traces, so one OTEL_EXPORTER_OTLP_PROTOCOL setting covers both.
  const exporter =
    config.otlpProtocol === 'http/json' ? new OTLPJsonMetricExporter() : new OTLPProtoMetricExporter();
  return new PeriodicExportingMetricReader({
    exporter,
    exportIntervalMillis: config.metricExportIntervalMs,
    exportTimeoutMillis: Math.min(30_000, config.metricExportIntervalMs),
  });
}

async function prometheusReader(
  config: NonNullable<TelemetryConfig['prometheus']>,
): Promise<PrometheusExporter> {
  const exporter = new PrometheusExporter({ port: config.port, host: config.host, preventServerStart: true });
  try {
    await exporter.startServer();
  } catch (err) {
    throw new Error(
      `SANDSTREAM_METRICS_PORT ${config.port}: cannot listen on ${config.host}: ${(err as Error).message}`,
    );
  }
  return exporter;
}

function withTimeout(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([work.then(() => undefined), timeout]).finally(() => clearTimeout(timer));
}

/**
 * Sets up OpenTelemetry for one service process. Off by default (see telemetry-config.ts): then
 * the API stays a no-op and costs nothing, except that SANDSTREAM_METRICS_PORT alone still
 * opens a Prometheus endpoint. Call once, early, and await the returned shutdown() on SIGTERM.
 */
export async function initTelemetry(options: InitTelemetryOptions): Promise<Telemetry> {
  const config = telemetryConfigFromEnv(options.env);
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 5_000;
  const readers: IMetricReader[] = [];
  if (config.prometheus) readers.push(await prometheusReader(config.prometheus));

  let stop: () => Promise<void>;
  const stopMetrics = () => {
    metricsOn = false;
  };
  if (config.otlp) {
    if (config.otlpMetrics) readers.push(otlpMetricReader(config));
    const sdk = new NodeSDK({
      serviceName: options.serviceName,
      // Span exporter, sampler (OTEL_TRACES_SAMPLER), propagators and batch settings come from
      // the standard OTEL_* variables; only metric readers are chosen here.
      metricReaders: readers,
      // Logs go to stdout through pino; an empty list stops the SDK from adding an OTLP log exporter.
      logRecordProcessors: [],
      instrumentations: [],
      // Random ids as usual, plus the planned ids the dispatcher's step spans need (planned-span.ts).
      idGenerator: plannedSpanIdGenerator,
    });
    sdk.start();
    tracing = true;
    metricsOn = readers.length > 0;
    stop = () => {
      tracing = false;
      stopMetrics();
      return sdk.shutdown();
    };
  } else if (readers.length > 0) {
    const provider = new MeterProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: options.serviceName }),
      readers,
    });
    metrics.setGlobalMeterProvider(provider);
    metricsOn = true;
    stop = () => {
      stopMetrics();
      return provider.shutdown();
    };
  } else {
    stop = async () => {};
  }

  let stopping: Promise<void> | undefined;
  return {
    config,
    flushMetrics: () =>
      withTimeout(
        Promise.all(readers.map((reader) => reader.forceFlush().catch(() => undefined))).then(
          () => undefined,
        ),
        shutdownTimeoutMs,
      ),
    shutdown: () => {
      stopping ??= withTimeout(
        stop().catch(() => undefined),
        shutdownTimeoutMs,
      );
      return stopping;
    },
  };
}
