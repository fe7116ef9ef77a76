import { SandboxLiveness } from '@sandstream/bus';
import { DEFAULT_INPROCESS_REGISTRY_KEY } from '@sandstream/sandbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { waitAll } from './job-helpers.js';

// Issue 27: under CPU overload (load 30–45) 24 of 50 Docker sandboxes were failed as lost ("the
// agent stopped heart-beating"): their agents were starved, not dead (the heartbeat key lives 3
// intervals, 6 s by default, and a CPU-throttled agent can miss it). Starvation is reproduced
// cheaply by stopping an in-process agent (SIGSTOP) past its heartbeat TTL: its process still
// runs, so pod-lifecycle's backend check tells the dispatcher to wait, and after SIGCONT the
// job finishes. A killed agent (SIGKILL) is still failed as lost, at once.
describe('a late heartbeat is checked with the backend before a sandbox is failed', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ label: 'starve', env: { HEARTBEAT_CHECK_MS: '1000' } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const agentPid = async (jobId: string): Promise<number> => {
    let pid: number | undefined;
    await expect
      .poll(
        async () => {
          const raw = await stack.redis.hget(DEFAULT_INPROCESS_REGISTRY_KEY, jobId);
          pid = raw ? (JSON.parse(raw) as { pid: number }).pid : undefined;
          return pid !== undefined && (await stack.client.get(jobId))?.state === 'running';
        },
        { timeout: 60_000, interval: 100 },
      )
      .toBe(true);
    return pid as number;
  };

  it('an agent stopped past its heartbeat TTL survives and its step completes; a killed one is failed as lost', async () => {
    const liveness = new SandboxLiveness(stack.redis, stack.client.keys);
    const { jobId: slow } = await stack.client.submit({
      id: `${stack.namespace}-slow`,
      image: 'none',
      steps: [{ command: 'sleep 12; echo finished', shell: true }],
    });
    const { jobId: dead } = await stack.client.submit({
      id: `${stack.namespace}-dead`,
      image: 'none',
      steps: [{ command: 'sleep 60', shell: true }],
    });
    const slowPid = await agentPid(slow);
    const deadPid = await agentPid(dead);

    process.kill(slowPid, 'SIGSTOP');
    try {
      // Its heartbeat expires (TTL 6 s), the dispatcher suspects it, pod-lifecycle finds the
      // process still there: the sandbox is given more time.
      await expect
        .poll(async () => (await liveness.verdict(slow))?.state, { timeout: 60_000, interval: 250 })
        .toBe('running');
      // Well past the TTL and several rounds of the check: still running, not failed.
      const since = Number(await stack.redis.zscore(`${stack.namespace}:liveness:suspects`, slow));
      await expect.poll(() => Date.now() - since, { timeout: 30_000, interval: 500 }).toBeGreaterThan(8_000);
      expect((await stack.client.get(slow))?.state).toBe('running');
    } finally {
      process.kill(slowPid, 'SIGCONT');
    }

    process.kill(deadPid, 'SIGKILL');
    const records = await waitAll(stack.client, [slow, dead], 120_000);
    const slowRecord = records.get(slow);
    expect(slowRecord?.state, slowRecord?.reason).toBe('succeeded');
    const deadRecord = records.get(dead);
    expect(deadRecord?.state).toBe('failed');
    expect(deadRecord?.reason).toMatch(
      /sandbox lost: the agent stopped heart-beating: its sandbox no longer runs/,
    );
    // No suspect left behind (the verdict's clean-up may land just after the job's failure).
    await expect.poll(() => liveness.suspects(), { timeout: 30_000, interval: 250 }).toEqual([]);
  }, 240_000);
});
