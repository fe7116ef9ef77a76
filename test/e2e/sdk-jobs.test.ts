import { JobSpecError } from '@sandstream/bus';
import {
  type FollowItem,
  JobNotFoundError,
  SandstreamOptionsError,
  WaitTimeoutError,
} from '@sandstream/client';
import { freePort, type RunningService, startService, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRANSPORTS, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// The SDK's job calls (submit, get, list, wait, follow from a cursor, cancel) against the four
// services, once over Redis and once over the HTTP API: the same answers and the same errors.

const redisUrl = testRedisUrl();

describe.each(TRANSPORTS)('SDK jobs (over %s)', (transport) => {
  let stack: Stack;
  let view: TransportView;
  beforeAll(async () => {
    stack = await startStack({ label: transport === 'http' ? 'jobsh' : 'jobs' });
    view = await viewThrough(stack, transport, redisUrl);
  });
  afterAll(async () => {
    await view?.stop();
    await stack?.stop();
  });
  const id = (name: string) => `${stack.namespace}-${name}`;

  it('submits, waits, gets, lists, and follows a job from the start and from a cursor', async () => {
    const spec = {
      id: id('hello'),
      image: 'debian:bookworm-slim',
      labels: { suite: 'sdk-jobs' },
      steps: [{ command: 'sh', args: ['-c', 'for i in 1 2 3; do echo line $i; done; echo err >&2'] }],
    };
    expect(await view.client.submit(spec)).toEqual({ jobId: id('hello'), created: true });
    // The same spec again is the same job (idempotent by id).
    expect(await view.client.submit(spec)).toEqual({ jobId: id('hello'), created: false });
    const done = await view.client.wait(id('hello'), { timeoutMs: 60_000 });
    expect(done).toMatchObject({ id: id('hello'), state: 'succeeded', tenant: 'default' });
    expect(Object.values(done.stepResults)).toMatchObject([{ exitCode: 0 }]);
    expect(await view.client.get(id('hello'))).toMatchObject({ state: 'succeeded' });
    expect(await view.client.get(id('never-there'))).toBeNull();
    const listed = await view.client.list({ tenant: 'default', limit: 1000 });
    expect(listed.map((r) => r.id)).toContain(id('hello'));

    const items: FollowItem[] = [];
    for await (const item of view.client.follow(id('hello'))) items.push(item);
    const lines = items.flatMap((i) => (i.type === 'output' ? [`${i.stream}:${i.line}`] : []));
    expect(lines).toEqual(['stdout:line 1', 'stdout:line 2', 'stdout:line 3', 'stderr:err']);
    expect(items.at(-1)).toMatchObject({ type: 'state', to: 'succeeded', terminal: true });
    // From a cursor: exactly what came after it.
    const second = items.findIndex((i) => i.type === 'output' && i.line === 'line 2');
    const rest: FollowItem[] = [];
    for await (const item of view.client.follow(id('hello'), { from: items[second]?.cursor }))
      rest.push(item);
    expect(rest).toEqual(items.slice(second + 1));
    const states: FollowItem[] = [];
    for await (const item of view.client.follow(id('hello'), { statesOnly: true })) states.push(item);
    expect(states.every((i) => i.type === 'state')).toBe(true);
    expect(states.map((i) => (i.type === 'state' ? i.to : ''))).toContain('running');
  });

  it('follows a running job up to now (untilNow): what is there, then it ends, the job still running', async () => {
    const { jobId } = await view.client.submit({
      id: id('until-now'),
      image: 'debian:bookworm-slim',
      steps: [{ command: 'sh', args: ['-c', 'echo first; echo second; sleep 120'] }],
    });
    try {
      const lines = async () => {
        const out: string[] = [];
        for await (const item of view.client.follow(jobId, { untilNow: true }))
          if (item.type === 'output') out.push(item.line);
        return out;
      };
      await expect.poll(lines, { timeout: 60_000 }).toEqual(['first', 'second']);
      expect((await view.client.get(jobId))?.state).toBe('running');
    } finally {
      await view.client.cancel(jobId);
    }
  }, 90_000);

  it('cancels a running job; refuses bad specs and options by name; unknown ids are typed errors', async () => {
    const { jobId } = await view.client.submit({
      id: id('long'),
      image: 'debian:bookworm-slim',
      steps: [{ command: 'sh', args: ['-c', 'echo started; sleep 60'] }],
    });
    for await (const item of view.client.follow(jobId)) if (item.type === 'output') break;
    expect(await view.client.cancel(jobId)).toMatchObject({ status: 'requested', state: 'running' });
    expect(await view.client.wait(jobId, { timeoutMs: 60_000 })).toMatchObject({ state: 'cancelled' });
    expect(await view.client.cancel(jobId)).toMatchObject({ status: 'terminal', state: 'cancelled' });
    expect(await view.client.cancel(id('never-there'))).toEqual({ status: 'missing' });

    const bad = await view.client
      .submit({ image: 'x', steps: [{ command: '' }] }, 'bad.yaml')
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(JobSpecError);
    expect((bad as JobSpecError).issues.join('\n')).toMatch(/steps\.0\.command/);
    await expect(view.client.wait(id('never-there'))).rejects.toBeInstanceOf(JobNotFoundError);
    await expect(view.client.list({ limit: 5000 })).rejects.toBeInstanceOf(SandstreamOptionsError);
    const slow = await view.client.submit({
      id: id('slow'),
      image: 'debian:bookworm-slim',
      steps: [{ command: 'sleep', args: ['30'] }],
    });
    await expect(view.client.wait(slow.jobId, { timeoutMs: 500 })).rejects.toBeInstanceOf(WaitTimeoutError);
    await view.client.cancel(slow.jobId);
  });

  /**
   * A job of `count` numbered lines followed over an API of its own (fixed port), which
   * `restart` takes down and brings back under the follow once the first line is in; the lines
   * the follow saw, in order.
   */
  async function followThroughRestart(
    name: string,
    count: number,
    restart: (api: RunningService, jobId: string) => Promise<void>,
  ): Promise<string[]> {
    const port = await freePort();
    const env = { ...stack.env, REDIS_URL: redisUrl, API_PORT: String(port), API_ANONYMOUS: 'loopback' };
    let api: RunningService = await startService('api', env);
    const { SandstreamClient } = await import('@sandstream/client');
    const client = new SandstreamClient({ url: `http://127.0.0.1:${port}` });
    try {
      const { jobId } = await client.submit({
        id: id(name),
        image: 'debian:bookworm-slim',
        steps: [
          { command: 'sh', args: ['-c', `for i in $(seq 1 ${count}); do echo n $i; sleep 0.05; done`] },
        ],
      });
      const lines: string[] = [];
      let restarted: Promise<void> | undefined;
      for await (const item of client.follow(jobId)) {
        if (item.type !== 'output') continue;
        lines.push(item.line);
        restarted ??= (async () => {
          await restart(api, jobId);
          api = await startService('api', env);
        })();
      }
      await restarted;
      return lines;
    } finally {
      await client.close();
      await api.stop(15_000);
    }
  }
  const numbered = (count: number) => Array.from({ length: count }, (_, i) => `n ${i + 1}`);

  it.runIf(transport === 'http')(
    'a follow rides through the API killed and restarted: reconnected with Last-Event-ID, no line missed or twice',
    async () => {
      // Killed: the follow sees its stream cut, then the API unreachable for a while, then resumes.
      const lines = await followThroughRestart('restart', 80, async (api) => {
        await api.kill9();
        await new Promise((resolve) => setTimeout(resolve, 1000));
      });
      expect(lines).toEqual(numbered(80));
    },
  );

  it.runIf(transport === 'http')(
    'a stopping API ends its followers at once (SIGTERM); the follow resumes on the next one, no line missed or twice',
    async () => {
      let stateWhenStopped: string | undefined;
      // A rolling restart: SIGTERM. Had the API waited for its open streams, it would stop only
      // once this job's stream ended, that is after the job.
      const lines = await followThroughRestart('rolling', 200, async (api, jobId) => {
        expect(await api.stop(60_000)).toBe(0);
        stateWhenStopped = (await stack.client.get(jobId))?.state;
      });
      expect(stateWhenStopped).toBe('running');
      expect(lines).toEqual(numbered(200));
    },
    90_000,
  );
});
