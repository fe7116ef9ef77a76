import { telemetryConfigFromEnv } from '@sandstream/telemetry/telemetry-config';

export interface CliTelemetry {
  shutdown(): Promise<void>;
}

/**
 * Telemetry for `sandstream submit`, switched by the same variables as the services
 * (SANDSTREAM_TELEMETRY / OTEL_EXPORTER_OTLP_ENDPOINT, see docs/telemetry.md). The OpenTelemetry
 * SDK is imported only when it is on: loading it costs about half a second, which a CLI run
 * with telemetry off must not pay. Traces only: a one-shot process has no metrics worth a
 * push, and it must not open the services' Prometheus port.
 */
export async function startCliTelemetry(
  env: NodeJS.ProcessEnv = process.env,
): Promise<CliTelemetry | undefined> {
  if (!telemetryConfigFromEnv(env).otlp) return undefined;
  const { initTelemetry } = await import('@sandstream/telemetry');
  return initTelemetry({
    serviceName: 'sandstream-cli',
    env: { ...env, OTEL_METRICS_EXPORTER: 'none', SANDSTREAM_METRICS_PORT: undefined },
  });
}
