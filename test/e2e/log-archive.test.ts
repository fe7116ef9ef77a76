import { NatsServer, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectLogsFromArchive } from '../helpers/cli-run.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 16 end to end: with the archive on (the services given NATS_URL), a step printing
// 1,000,000 numbered lines loses none, even with the archiver's process killed mid-step; its
// follower accounts for every line (shown, or inside a marked gap); the events stream stays
// bounded; and `sandstream logs` after the job prints every line once, in order, from the archive.

const LINES = 1_000_000;

describe('every line kept: the JetStream log archive', () => {
  let nats: NatsServer;
  let stack: Stack;
  beforeAll(async () => {
    nats = await NatsServer.start({ jetstream: true });
    stack = await startStack({ label: 'arch', env: { NATS_URL: nats.url, LOG_ARCHIVE: 'on' } });
  });
  afterAll(async () => {
    await stack?.stop();
    await nats?.stop();
  });

  it('keeps all of a 1,000,000-line step through an archiver crash, and logs reads them back', async () => {
    const { jobId } = await stack.client.submit({
      id: `${stack.namespace}-million`,
      image: 'debian:bookworm-slim',
      steps: [{ command: 'seq', args: ['1', String(LINES)], timeoutSeconds: 600 }],
    });
    const events = stack.client.keys.sandbox(jobId).events;

    // The follower: every line is shown, or inside a gap it was told about.
    let shown = 0;
    let inGaps = 0;
    let lastSeq = 0;
    let ordered = true;
    let maxLength = 0;
    let crashed = false;
    for await (const item of stack.client.follow(jobId)) {
      if (item.type === 'output') {
        shown++;
        if (item.seq <= lastSeq) ordered = false;
        lastSeq = item.seq;
        if (item.line !== String(item.seq)) ordered = false;
      } else if (item.type === 'gap') {
        inGaps += item.to - item.from + 1;
        lastSeq = item.to;
      }
      if (shown % 50_000 === 1) maxLength = Math.max(maxLength, await stack.redis.xlen(events));
      // The archiver (in the reaper) is killed with kill -9 a fifth of the way in, and replaced.
      if (!crashed && shown + inGaps > LINES / 5) {
        crashed = true;
        await stack.crashAndRestart('reaper');
      }
      if (item.type === 'state' && item.terminal) {
        expect(item.to).toBe('succeeded');
        break;
      }
    }
    expect(crashed).toBe(true);
    expect(ordered).toBe(true);
    expect(shown + inGaps).toBe(LINES);
    // Bounded: the agent waits for the archiver instead of letting the stream grow or trimming it.
    expect(maxLength).toBeLessThanOrEqual(10_000);
    const record = await stack.client.get(jobId);
    expect(record?.stepResults).toBeDefined();
    expect(Object.values(record?.stepResults ?? {})[0]).toMatchObject({ exitCode: 0, outputLines: LINES });
    expect(Object.values(record?.stepResults ?? {})[0]?.droppedLines ?? 0).toBe(0);

    // The archiver finishes the job's log (its marker says done), then logs reads it back.
    await vi.waitUntil(
      async () => (await stack.redis.get(stack.client.keys.jobLogArchive(jobId))) === 'done',
      {
        timeout: 120_000,
        interval: 500,
      },
    );
    // Redis no longer has the whole stream: the archive is the only place all lines are.
    expect(await stack.redis.xlen(events)).toBeLessThan(LINES);
    await expectLogsFromArchive({
      jobId,
      natsUrl: nats.url,
      redisUrl: testRedisUrl(),
      namespace: stack.namespace,
      lines: LINES,
    });
  }, 600_000);
});
