export interface TracingConfig {
  /** Traces endpoint URL, or undefined when tracing is off. */
  url: string | undefined;
  headers: Record<string, string>;
  serviceName: string;
  /** Why tracing is off despite an endpoint being set, for one warning line at start-up. */
  warning: string | undefined;
}

/** An absolute http(s) URL (checked without zod: the agent's start-up heap holds no schema). */
function isHttpUrl(text: string): boolean {
  if (!/^https?:/.test(text)) return false;
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** `k1=v1,k2=v2` with URL-encoded values (the OTEL_EXPORTER_OTLP_HEADERS format). */
function parseHeaders(raw: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (raw ?? '').split(',')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    try {
      headers[decodeURIComponent(pair.slice(0, eq).trim())] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      // A malformed escape drops that header only.
    }
  }
  return headers;
}

/**
 * Reads the standard OTEL_* variables the agent honours. Telemetry must never stop the agent
 * from running steps, so bad values switch tracing off with a warning instead of throwing.
 */
export function tracingConfigFromEnv(env: NodeJS.ProcessEnv): TracingConfig {
  const off = (warning?: string): TracingConfig => ({
    url: undefined,
    headers: {},
    serviceName: '',
    warning,
  });
  if (env.SANDSTREAM_TELEMETRY === 'off' || env.OTEL_SDK_DISABLED === 'true') return off();
  const signalUrl = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const baseUrl = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  // Per the OTLP exporter spec the signal-specific URL is used as-is; the base gets /v1/traces.
  const url = signalUrl || (baseUrl ? `${baseUrl.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (!url) return off();
  if (!isHttpUrl(url)) {
    const name = signalUrl ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
    return off(`${name} is not an http(s) URL; step tracing is off`);
  }
  return {
    url,
    headers: {
      ...parseHeaders(env.OTEL_EXPORTER_OTLP_HEADERS),
      ...parseHeaders(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS),
    },
    serviceName: env.OTEL_SERVICE_NAME?.trim() || 'sandstream-agent',
    warning: undefined,
  };
}
