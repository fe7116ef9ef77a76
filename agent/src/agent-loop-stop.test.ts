import { testRedisUrl } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { AgentLoop } from './agent-loop.js';
import { ExitCode } from './exit-codes.js';
import { createLogger } from './logger.js';
import { openConnections } from './redis-connections.js';
import { executeStep } from './steps/execute-step.js';
import {
  deleteKeys,
  POLL,
  popResult,
  pushStep,
  readEvents,
  testClient,
  uniqueJobId,
} from './testing/agent-harness.js';

const redis = testClient();
afterAll(() => redis.disconnect());

/** Handles that keep a process alive; stop() must leave none of its own behind. */
function liveHandles(): string[] {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap' || r === 'Timeout');
}

function newLoop(jobId: string) {
  const log = createLogger({ verbose: false, write: () => {} });
  const connections = openConnections(testRedisUrl(), jobId, log);
  return new AgentLoop({
    jobId,
    keys: sandboxKeys(jobId),
    connections,
    execute: executeStep,
    log,
    workdir: process.cwd(),
    idleTimeoutSeconds: 30,
    maxIdleWaits: 5,
    heartbeatIntervalMs: 100,
    eventBufferLines: 1000,
    eventBufferBytes: 1024 * 1024,
    notifyStreamMaxLength: 1000,
  });
}

describe('AgentLoop.stop', () => {
  it('mid-step: aborts the step, delivers its result, and leaves no socket or timer running', async () => {
    const jobId = uniqueJobId('agent-stop');
    const keys = sandboxKeys(jobId);
    const before = liveHandles().length;
    const loop = newLoop(jobId);
    const running = loop.run();
    try {
      await pushStep(redis, keys, {
        schemaVersion: 1,
        stepId: 'long',
        command: 'sh',
        args: ['-c', 'echo go; sleep 30'],
      });
      await vi.waitUntil(
        async () =>
          (await readEvents(redis, keys, 'long')).some((e) => e.kind === 'stdout') ? true : undefined,
        POLL,
      );
      loop.stop('test');
      expect(await running).toBe(ExitCode.ok);
      expect(await popResult(redis, keys, 1)).toMatchObject({ stepId: 'long', cancelled: true });
      expect(await redis.exists(keys.heartbeat)).toBe(0);
      // Closed sockets and cleared timers disappear from the list on the next turns of the loop.
      await vi.waitUntil(async () => (liveHandles().length <= before ? true : undefined), {
        ...POLL,
        timeout: 3000,
      });
    } finally {
      await deleteKeys(redis, keys);
    }
  });

  it('while idle: the pending pop is interrupted at once', async () => {
    const jobId = uniqueJobId('agent-stop');
    const keys = sandboxKeys(jobId);
    const loop = newLoop(jobId);
    const running = loop.run();
    await vi.waitUntil(async () => ((await redis.exists(keys.heartbeat)) ? true : undefined), POLL);
    const stopped = Date.now();
    loop.stop('test');
    expect(await running).toBe(ExitCode.ok);
    // Not interrupted, the pop would block for its whole idle timeout (30 s).
    expect(Date.now() - stopped).toBeLessThan(10_000);
    await deleteKeys(redis, keys);
  });
});
