import { createServer } from 'node:net';
import { trace } from '@opentelemetry/api';
import { afterAll, describe, expect, it } from 'vitest';
import { initTelemetry } from './init-telemetry.js';

const saved = { ...process.env };
afterAll(() => {
  process.env = saved;
});

describe('initTelemetry shutdown', () => {
  it('is bounded when the collector accepts connections but never answers', async () => {
    // A TCP server that never replies: the exporter's request hangs until its own timeout.
    const sockets: import('node:net').Socket[] = [];
    const blackhole = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', () => r()));
    const address = blackhole.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    Object.assign(process.env, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_EXPORTER_OTLP_TIMEOUT: '30000',
    });
    const telemetry = await initTelemetry({ serviceName: 'hang-test', shutdownTimeoutMs: 1000 });
    trace.getTracer('t').startSpan('never-delivered').end();
    const t0 = Date.now();
    await telemetry.shutdown();
    // Bounded by shutdownTimeoutMs (1 s), not the exporter's 30 s: far under the latter, with room for load.
    expect(Date.now() - t0).toBeLessThan(10_000);
    for (const s of sockets) s.destroy();
    blackhole.close();
  });
});
