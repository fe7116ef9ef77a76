import { createServer } from 'node:net';
import { metrics } from '@opentelemetry/api';
import { test } from '@sandstream/test-support/vitest';
import { afterAll, describe, expect, it } from 'vitest';
import { initTelemetry, type Telemetry } from './init-telemetry.js';
import { createSandstreamMetrics } from './metrics.js';

let telemetry: Telemetry | undefined;
afterAll(async () => {
  await telemetry?.shutdown();
  metrics.disable();
});

describe('metrics on the Prometheus endpoint', () => {
  test('serves every instrument, with the values recorded and observed', async ({ port }) => {
    telemetry = await initTelemetry({
      serviceName: 'metrics-test',
      env: { SANDSTREAM_METRICS_PORT: String(port), SANDSTREAM_METRICS_HOST: '127.0.0.1' },
    });
    expect(telemetry.config.otlp).toBe(false);
    const m = createSandstreamMetrics();
    m.queueWaitSeconds.record(0.2, { queue: 'jobs' });
    m.sandboxStartSeconds.record(1.5, { backend: 'docker' });
    m.stepDurationSeconds.record(0.05, { kind: 'run', outcome: 'failed' });
    m.stepEvents.add(42, { stream: 'stdout' });
    m.droppedLines.add(3);
    m.activeSandboxes.add(2, { backend: 'docker' });
    m.activeSandboxes.add(-1, { backend: 'docker' });
    m.reaperScans.add(1, { target: 'keys' });
    m.reaperDeletions.add(7, { target: 'keys' });
    m.observeQueueDepth(async () => [{ queue: 'jobs', state: 'waiting', depth: 5 }]);
    m.observeTenantSlots(() => [{ tenant: 'acme', inUse: 4 }]);
    m.poolHits.add(3, { pool: 'node' });
    m.poolMisses.add(2, { pool: 'node', reason: 'empty' });
    m.poolClaimSeconds.record(0.004, { pool: 'node' });
    m.poolRefillSeconds.record(0.8, { pool: 'node' });
    m.observePoolMembers(() => [{ pool: 'node', state: 'ready', members: 6 }]);
    // A failing observer must not take the others down with it.
    m.observeQueueDepth(async () => {
      throw new Error('redis down');
    });

    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    const body = await res.text();
    const line = (re: RegExp) => body.split('\n').find((l) => re.test(l));
    expect(line(/^sandstream_queue_wait_time_count\{.*queue="jobs"/)).toMatch(/ 1$/);
    expect(line(/^sandstream_sandbox_start_latency_sum\{.*backend="docker"/)).toMatch(/ 1\.5$/);
    expect(line(/^sandstream_step_duration_count\{.*kind="run"/)).toMatch(/ 1$/);
    expect(line(/^sandstream_step_events_total\{.*stream="stdout"/)).toMatch(/ 42$/);
    expect(line(/^sandstream_step_dropped_lines_total/)).toMatch(/ 3$/);
    expect(line(/^sandstream_sandbox_active\{.*backend="docker"/)).toMatch(/ 1$/);
    expect(line(/^sandstream_reaper_scans_total/)).toMatch(/ 1$/);
    expect(line(/^sandstream_reaper_deletions_total\{.*target="keys"/)).toMatch(/ 7$/);
    expect(line(/^sandstream_queue_depth\{.*state="waiting"/)).toMatch(/ 5$/);
    expect(line(/^sandstream_tenant_slots_in_use\{.*tenant="acme"/)).toMatch(/ 4$/);
    expect(line(/^sandstream_pool_hits_total\{.*pool="node"/)).toMatch(/ 3$/);
    expect(line(/^sandstream_pool_misses_total\{.*reason="empty"/)).toMatch(/ 2$/);
    expect(line(/^sandstream_pool_claim_latency_count\{.*pool="node"/)).toMatch(/ 1$/);
    expect(line(/^sandstream_pool_refill_latency_sum\{.*pool="node"/)).toMatch(/ 0\.8$/);
    expect(line(/^sandstream_pool_members\{.*state="ready"/)).toMatch(/ 6$/);
  });

  it('reports a busy port by variable name', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const address = blocker.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      await expect(
        initTelemetry({
          serviceName: 'x',
          env: { SANDSTREAM_METRICS_PORT: String(port), SANDSTREAM_METRICS_HOST: '127.0.0.1' },
        }),
      ).rejects.toThrow(new RegExp(`SANDSTREAM_METRICS_PORT ${port}`));
    } finally {
      blocker.close();
    }
  });
});
