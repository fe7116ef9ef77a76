import { z } from 'zod';

/*
 * The switch is deliberately one variable: SANDSTREAM_TELEMETRY=otlp turns tracing and OTLP
 * metrics on, =off forces them off. Left unset, tracing follows the standard OpenTelemetry
 * convention: it is on exactly when an OTLP endpoint is configured. Everything else (sampler,
 * protocol, headers, batch sizes) is read by the SDK from the standard OTEL_* variables.
 */
const emptyAsUndefined = (v: unknown) => (v === '' ? undefined : v);

const port = (name: string) =>
  z.preprocess(
    emptyAsUndefined,
    z.coerce
      .number({ error: `${name} must be a port number` })
      .int(`${name} must be an integer`)
      .min(0, `${name} must be between 0 and 65535`)
      .max(65535, `${name} must be between 0 and 65535`)
      .optional(),
  );

export const TelemetryEnvSchema = z.object({
  SANDSTREAM_TELEMETRY: z.preprocess(
    emptyAsUndefined,
    z.enum(['off', 'otlp'], { error: 'SANDSTREAM_TELEMETRY must be "off" or "otlp"' }).optional(),
  ),
  OTEL_SDK_DISABLED: z.preprocess(emptyAsUndefined, z.enum(['true', 'false']).optional()),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.preprocess(
    emptyAsUndefined,
    z.url({ error: 'OTEL_EXPORTER_OTLP_ENDPOINT must be a URL' }).optional(),
  ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.preprocess(
    emptyAsUndefined,
    z.url({ error: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be a URL' }).optional(),
  ),
  /** The SDK also knows grpc, but the gRPC exporter is not shipped: refuse it by name. */
  OTEL_EXPORTER_OTLP_PROTOCOL: z.preprocess(
    emptyAsUndefined,
    z
      .enum(['http/protobuf', 'http/json'], {
        error: 'OTEL_EXPORTER_OTLP_PROTOCOL must be "http/protobuf" or "http/json"',
      })
      .optional()
      .default('http/protobuf'),
  ),
  OTEL_METRICS_EXPORTER: z.preprocess(emptyAsUndefined, z.string().optional()),
  OTEL_METRIC_EXPORT_INTERVAL: z.preprocess(
    emptyAsUndefined,
    z.coerce
      .number({ error: 'OTEL_METRIC_EXPORT_INTERVAL must be a number of milliseconds' })
      .int()
      .min(100, 'OTEL_METRIC_EXPORT_INTERVAL is at least 100 ms')
      .max(3_600_000, 'OTEL_METRIC_EXPORT_INTERVAL is at most 3600000 ms')
      .optional()
      .default(60_000),
  ),
  /** Prometheus scrape endpoint (GET /metrics) on this port; independent of the OTLP switch. */
  SANDSTREAM_METRICS_PORT: port('SANDSTREAM_METRICS_PORT'),
  /** Loopback by default for the same reason as HEALTH_HOST: sandboxes on a bridge reach host addresses. */
  SANDSTREAM_METRICS_HOST: z.preprocess(
    emptyAsUndefined,
    z.string().max(255).optional().default('127.0.0.1'),
  ),
});

export interface TelemetryConfig {
  /** Traces and OTLP metrics go out over OTLP/HTTP. */
  otlp: boolean;
  otlpProtocol: 'http/protobuf' | 'http/json';
  /** OTLP metrics are sent (unless OTEL_METRICS_EXPORTER=none). */
  otlpMetrics: boolean;
  metricExportIntervalMs: number;
  prometheus: { port: number; host: string } | undefined;
}

/** Validates the telemetry part of the environment; throws one message naming every bad variable. */
export function telemetryConfigFromEnv(env: NodeJS.ProcessEnv = process.env): TelemetryConfig {
  const parsed = TelemetryEnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid telemetry environment: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  }
  const e = parsed.data;
  const endpointSet =
    e.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
  const otlp =
    e.OTEL_SDK_DISABLED !== 'true' &&
    (e.SANDSTREAM_TELEMETRY === 'otlp' || (e.SANDSTREAM_TELEMETRY === undefined && endpointSet));
  const metricExporters = (e.OTEL_METRICS_EXPORTER ?? 'otlp').split(',').map((s) => s.trim());
  return {
    otlp,
    otlpProtocol: e.OTEL_EXPORTER_OTLP_PROTOCOL,
    otlpMetrics: otlp && !metricExporters.includes('none'),
    metricExportIntervalMs: e.OTEL_METRIC_EXPORT_INTERVAL,
    prometheus:
      e.SANDSTREAM_METRICS_PORT === undefined
        ? undefined
        : { port: e.SANDSTREAM_METRICS_PORT, host: e.SANDSTREAM_METRICS_HOST },
  };
}
