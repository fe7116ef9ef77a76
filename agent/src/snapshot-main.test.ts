import { spawnSync } from 'node:child_process';
import { type OtlpReceiver, startOtlpReceiver } from '@sandstream/test-support';
import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type AgentProcess,
  deleteKeys,
  popResult,
  pushStep,
  seaCommand,
  startAgent,
  stopAgent,
  testClient,
} from './testing/agent-harness.js';

/** A day, in seconds: how far ahead the agent's monotonic clock is put, as on another machine. */
const DAY_S = 86_400;

/** A time namespace with a shifted monotonic clock (Linux 5.6+, needs CAP_SYS_ADMIN: root here). */
const timeNamespace = ['unshare', '--time', `--monotonic=${DAY_S}`, '--fork', '--kill-child'];
const canShiftClock = spawnSync(timeNamespace[0] as string, [...timeNamespace.slice(1), 'true']).status === 0;

/**
 * The single executable starts from a V8 startup snapshot made at build time (snapshot-main.ts):
 * module state from that moment must not stand in for this run's. The step spans' wall-clock
 * anchor (wall clock minus monotonic clock) is such state: taken at module load, every span of
 * an agent on another machine (or after a reboot) would be off by the difference of their
 * monotonic clocks. Spans also check that the exporter can load node:http at all in the single
 * executable (a dynamic import there used to fail).
 */
describe('the single executable, started from its startup snapshot', () => {
  let receiver: OtlpReceiver;
  let redis: Redis;
  let agent: AgentProcess | undefined;

  beforeEach(async () => {
    receiver = await startOtlpReceiver();
    redis = testClient();
  });

  afterEach(async () => {
    if (agent) {
      await stopAgent(agent);
      await deleteKeys(redis, agent.keys);
    }
    redis.disconnect();
    await receiver.close();
  });

  async function spanStartMs(command: string[]): Promise<{ before: number; startMs: number; after: number }> {
    agent = startAgent({ command, env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
    const before = Date.now();
    await pushStep(redis, agent.keys, {
      schemaVersion: 1,
      stepId: 'clocked',
      command: 'true',
      traceContext: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    });
    expect(await popResult(redis, agent.keys)).toMatchObject({ stepId: 'clocked', exitCode: 0 });
    const after = Date.now();
    const [span] = await receiver.waitFor((spans) => spans.length === 1, 15_000);
    return { before, startMs: Number((span?.startTimeUnixNano ?? 0n) / 1_000_000n), after };
  }

  it('exports its step spans, stamped within the step', async () => {
    const { before, startMs, after } = await spanStartMs(seaCommand());
    // Whole milliseconds on both sides; the span lies within the step's round trip.
    expect(startMs).toBeGreaterThanOrEqual(before - 1);
    expect(startMs).toBeLessThanOrEqual(after + 1);
  });

  it.skipIf(!canShiftClock)(
    "stamps them on this run's wall clock when its monotonic clock is not the build's",
    async () => {
      const { before, startMs, after } = await spanStartMs([...timeNamespace, ...seaCommand()]);
      expect(startMs).toBeGreaterThanOrEqual(before - 1);
      expect(startMs).toBeLessThanOrEqual(after + 1);
    },
  );
});
