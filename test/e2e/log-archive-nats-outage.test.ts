import { NatsServer, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectLogsFromArchive } from '../helpers/cli-run.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 27: NATS down for 60 s half-way through a 1,000,000-line step. nats.js gives up after 10
// reconnect attempts 2 s apart (~20 s): before the fix the reaper's relay and archive stopped for
// good, the agent waited at its high-water mark for an archive that never came, and the job hung.
// Now the job finishes, nothing is dropped, and the archive holds every line, once, in order.
// The outage is the full 60 s the issue names (three times the client's give-up); the service
// runs with its real reconnect settings. CI runs 200,000 lines (the outage still falls mid-job:
// the agent waits at its high-water mark for the archive, whatever the job's size);
// SANDSTREAM_NATS_OUTAGE_LINES=1000000 runs the full figure (run by hand: 187 s at load
// ~20 on 2 cores, 60 s of it the outage; docs/log-archive.md).

const LINES = Number(process.env.SANDSTREAM_NATS_OUTAGE_LINES ?? 200_000);
const OUTAGE_MS = 60_000;

describe('every line kept through a NATS outage', () => {
  let nats: NatsServer;
  let stack: Stack;
  beforeAll(async () => {
    nats = await NatsServer.start({ jetstream: true });
    stack = await startStack({ label: 'natsout', env: { NATS_URL: nats.url, LOG_ARCHIVE: 'on' } });
  });
  afterAll(async () => {
    await stack?.stop();
    await nats?.stop();
  });

  it(`NATS down 60 s mid-way through a ${LINES.toLocaleString('en')}-line job: the job finishes and the archive holds every line`, async () => {
    const { jobId } = await stack.client.submit({
      id: `${stack.namespace}-million`,
      image: 'debian:bookworm-slim',
      steps: [{ command: 'seq', args: ['1', String(LINES)], timeoutSeconds: 900 }],
    });
    let seen = 0;
    let outage = false;
    let outageStartedAt = 0;
    for await (const item of stack.client.follow(jobId)) {
      if (item.type === 'output') seen++;
      else if (item.type === 'gap') seen += item.to - item.from + 1;
      if (!outage && seen > LINES / 2) {
        outage = true;
        outageStartedAt = Date.now();
        await nats.halt();
        await new Promise((r) => setTimeout(r, OUTAGE_MS)); // the outage itself: nothing to await
        await nats.resume();
      }
      if (item.type === 'state' && item.terminal) {
        expect(item.to, stack.logs().slice(-4000)).toBe('succeeded');
        break;
      }
    }
    expect(outage).toBe(true);
    expect(Date.now() - outageStartedAt).toBeGreaterThanOrEqual(OUTAGE_MS);
    const record = await stack.client.get(jobId);
    const result = Object.values(record?.stepResults ?? {})[0];
    expect(result).toMatchObject({ exitCode: 0, outputLines: LINES });
    expect(result?.droppedLines ?? 0).toBe(0);

    await vi.waitUntil(
      async () => (await stack.redis.get(stack.client.keys.jobLogArchive(jobId))) === 'done',
      { timeout: 180_000, interval: 500 },
    );
    await expectLogsFromArchive({
      jobId,
      natsUrl: nats.url,
      redisUrl: testRedisUrl(),
      namespace: stack.namespace,
      lines: LINES,
    });
  }, 900_000);
});
