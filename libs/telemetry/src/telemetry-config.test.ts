import { describe, expect, it } from 'vitest';
import { telemetryConfigFromEnv } from './telemetry-config.js';

describe('telemetryConfigFromEnv', () => {
  it('is off by default', () => {
    expect(telemetryConfigFromEnv({})).toMatchObject({
      otlp: false,
      otlpMetrics: false,
      prometheus: undefined,
    });
  });

  it('turns on with SANDSTREAM_TELEMETRY=otlp or with an OTLP endpoint', () => {
    expect(telemetryConfigFromEnv({ SANDSTREAM_TELEMETRY: 'otlp' }).otlp).toBe(true);
    expect(telemetryConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).otlp).toBe(true);
    expect(
      telemetryConfigFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }).otlp,
    ).toBe(true);
  });

  it('lets SANDSTREAM_TELEMETRY=off and OTEL_SDK_DISABLED win over an endpoint', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(telemetryConfigFromEnv({ ...endpoint, SANDSTREAM_TELEMETRY: 'off' }).otlp).toBe(false);
    expect(telemetryConfigFromEnv({ ...endpoint, OTEL_SDK_DISABLED: 'true' }).otlp).toBe(false);
  });

  it('keeps OTLP metrics off with OTEL_METRICS_EXPORTER=none and reads the Prometheus port', () => {
    const c = telemetryConfigFromEnv({
      SANDSTREAM_TELEMETRY: 'otlp',
      OTEL_METRICS_EXPORTER: 'none',
      SANDSTREAM_METRICS_PORT: '9464',
    });
    expect(c).toMatchObject({
      otlp: true,
      otlpMetrics: false,
      prometheus: { port: 9464, host: '127.0.0.1' },
    });
  });

  it('names each bad variable and its limit', () => {
    expect(() => telemetryConfigFromEnv({ SANDSTREAM_TELEMETRY: 'yes' })).toThrow(
      /SANDSTREAM_TELEMETRY must be/,
    );
    expect(() => telemetryConfigFromEnv({ SANDSTREAM_METRICS_PORT: '70000' })).toThrow(
      /SANDSTREAM_METRICS_PORT must be between 0 and 65535/,
    );
    expect(() => telemetryConfigFromEnv({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL must be "http\/protobuf" or "http\/json"/,
    );
    expect(() => telemetryConfigFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT must be a URL/,
    );
  });
});
