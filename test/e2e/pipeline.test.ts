import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobSpecError, QueueNames } from '@sandstream/bus';
import { DEFAULT_INPROCESS_REGISTRY_KEY } from '@sandstream/sandbox';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { outputLines, waitAll } from './job-helpers.js';

// All four services as separate processes, driven only through the SDK, on the in-process backend.
const image = 'debian:bookworm-slim';
const scratch = mkdtempSync(join(tmpdir(), 'e2e-pipeline-'));
// Both describe blocks write here; removed once, after both.
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('pipeline (in-process backend)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      label: 'pipe',
      env: { SCHEDULER_GLOBAL_SLOTS: '12', SCHEDULER_TENANT_SLOTS: '12', STEP_GRACE_MS: '3000' },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });
  const id = (name: string) => `${stack.namespace}-${name}`;

  it('runs 200 jobs with mixed steps; all succeed with the right outputs', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) {
      const { jobId } = await stack.client.submit({
        id: id(`m${i}`),
        image,
        tenant: `t${i % 4}`,
        steps: [
          { kind: 'writeFile', path: 'data/msg.txt', content: `job ${i}\nline two\n` },
          { command: 'cat', args: ['data/msg.txt'] },
          { kind: 'readFile', path: 'data/msg.txt' },
          { kind: 'grep', pattern: 'two', path: 'data' },
        ],
      });
      ids.push(jobId);
    }
    const records = await waitAll(stack.client, ids, 280_000);
    const states = [...records.values()].map((r) => r.state);
    expect(
      states.filter((s) => s !== 'succeeded'),
      stack.logs().slice(-4000),
    ).toEqual([]);
    for (let i = 0; i < 200; i++) {
      const r = records.get(ids[i] as string);
      expect(r?.stepResults['step-3']?.output).toMatchObject({
        kind: 'readFile',
        content: `job ${i}\nline two\n`,
      });
      expect(r?.stepResults['step-4']?.output).toMatchObject({
        kind: 'grep',
        matches: [{ path: 'msg.txt', line: 2, text: 'line two' }],
      });
    }
    // Streamed output of a sample of jobs: the run step printed the file.
    for (const i of [0, 57, 199]) {
      expect(await outputLines(stack.client, ids[i] as string)).toEqual([
        `step-2:job ${i}`,
        'step-2:line two',
      ]);
    }
  }, 300_000);

  it('stops at a failing step and reports it', async () => {
    const marker = join(scratch, 'never');
    const { jobId } = await stack.client.submit({
      id: id('fail'),
      image,
      steps: [
        { command: 'echo', args: ['ok'] },
        { command: 'exit 7', shell: true },
        { command: 'touch', args: [marker] },
      ],
    });
    const r = await stack.client.wait(jobId, { timeoutMs: 30_000 });
    expect(r.state).toBe('failed');
    expect(r.reason).toMatch(/step-2 exited 7/);
    expect(r.stepResults['step-2']?.exitCode).toBe(7);
    expect(r.stepResults['step-3']).toBeUndefined();
    expect(() => readFileSync(marker)).toThrow();
  });

  it('continues past a failing step with continueOnError', async () => {
    const { jobId } = await stack.client.submit({
      id: id('coe'),
      image,
      steps: [
        { command: 'false', continueOnError: true },
        { command: 'echo', args: ['still here'] },
      ],
    });
    const r = await stack.client.wait(jobId, { timeoutMs: 30_000 });
    expect(r.state).toBe('succeeded');
    expect(r.stepResults['step-1']?.exitCode).toBe(1);
    expect(await outputLines(stack.client, jobId)).toEqual(['step-2:still here']);
    // follow() reads the whole timeline from the start, and resumes after any cursor.
    const all = [];
    for await (const item of stack.client.follow(jobId)) all.push(item);
    expect(all.map((i) => (i.type === 'state' ? i.to : i.type))).toEqual([
      'queued',
      'scheduled',
      'starting',
      'running',
      'step-started',
      'step-completed',
      'step-started',
      'output',
      'step-completed',
      'succeeded',
    ]);
    const resumed = [];
    for await (const item of stack.client.follow(jobId, { from: all[5]?.cursor })) resumed.push(item);
    expect(resumed).toEqual(all.slice(6));
  });

  it('times out a step, and a job, as timed-out', async () => {
    const step = await stack.client.submit({
      id: id('step-timeout'),
      image,
      steps: [{ command: 'sleep', args: ['30'], timeoutSeconds: 1 }, { command: 'true' }],
    });
    const job = await stack.client.submit({
      id: id('job-timeout'),
      image,
      timeoutSeconds: 2,
      steps: [{ command: 'sleep', args: ['30'] }],
    });
    const [s, j] = await Promise.all([
      stack.client.wait(step.jobId, { timeoutMs: 30_000 }),
      stack.client.wait(job.jobId, { timeoutMs: 30_000 }),
    ]);
    expect(s.state).toBe('timed-out');
    expect(s.stepResults['step-1']?.timedOut).toBe(true);
    expect(s.stepResults['step-2']).toBeUndefined();
    expect(j.state).toBe('timed-out');
    expect(j.reason).toMatch(/job exceeded its timeout of 2 s/);
  });

  it('cancels a running job at once, not when its step ends', async () => {
    const { jobId } = await stack.client.submit({
      id: id('cancel'),
      image,
      steps: [{ command: 'sleep', args: ['60'] }, { command: 'true' }],
    });
    for await (const item of stack.client.follow(jobId)) if (item.type === 'step-started') break;
    const asked = Date.now();
    await stack.client.cancel(jobId, 'test cancel');
    const r = await stack.client.wait(jobId, { timeoutMs: 30_000 });
    expect(r.state).toBe('cancelled');
    // The step would run 60 s: a bound far below that, and far above a loaded machine's jitter.
    expect(Date.now() - asked).toBeLessThan(15_000);
    expect(r.stepResults['step-1']?.cancelled).toBe(true);
    expect(r.stepResults['step-2']).toBeUndefined();
  });

  it('fails a job whose sandbox dies as sandbox lost within 15 s (default settings)', async () => {
    const { jobId } = await stack.client.submit({
      id: id('lost'),
      image,
      steps: [{ command: 'sleep', args: ['120'] }],
    });
    for await (const item of stack.client.follow(jobId)) if (item.type === 'step-started') break;
    const entry = await stack.redis.hget(DEFAULT_INPROCESS_REGISTRY_KEY, jobId);
    const pid = (JSON.parse(entry ?? '{}') as { pid?: number }).pid;
    expect(pid).toBeGreaterThan(0);
    // The whole sandbox vanishes at once, as a deleted pod would.
    process.kill(-(pid as number), 'SIGKILL');
    const killedAt = Date.now();
    const r = await stack.client.wait(jobId, { timeoutMs: 30_000 });
    expect(r.state).toBe('failed');
    expect(r.reason).toMatch(/sandbox lost/);
    expect(Date.now() - killedAt).toBeLessThan(15_000);
  });

  it('refuses bad specs with the field and rule, queuing nothing', async () => {
    const queue = new Queue(QueueNames.jobs, { connection: stack.redis, prefix: `{${stack.namespace}}` });
    const before = await queue.getJobCountByTypes('waiting', 'prioritized', 'active', 'completed', 'delayed');
    const bad: [unknown, RegExp][] = [
      [{ id: id('bad1'), image, steps: [] }, /steps: a job needs at least one step/],
      [{ id: id('bad2'), image, steps: [{ kind: 'explode' }] }, /steps\.0\.kind/],
      [{ id: id('bad3'), image, steps: [{ command: 'x', timeoutSeconds: 1e9 }] }, /steps\.0\.timeoutSeconds/],
      [{ id: id('bad4'), steps: [{ command: 'x' }] }, /a job needs a template or an image/],
      [{ id: 'has space', image, steps: [{ command: 'x' }] }, /id: job id may contain only/],
    ];
    for (const [spec, message] of bad) {
      const attempt = stack.client.submit(spec);
      await expect(attempt).rejects.toThrow(JobSpecError);
      await expect(attempt).rejects.toThrow(message);
    }
    expect(await queue.getJobCountByTypes('waiting', 'prioritized', 'active', 'completed', 'delayed')).toBe(
      before,
    );
    expect(await stack.client.get(id('bad1'))).toBeNull();
    await queue.close();
  });
});

describe('admission (in-process backend, one slot per tenant)', () => {
  let stack: Stack;
  const order = join(scratch, 'order.txt');
  beforeAll(async () => {
    stack = await startStack({
      label: 'adm',
      env: { SCHEDULER_GLOBAL_SLOTS: '20', SCHEDULER_TENANT_SLOTS: '1' },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });
  const append = (name: string, seconds = 0) => ({
    command: `echo "${name} start" >> ${order}; sleep ${seconds}; echo "${name} end" >> ${order}`,
    shell: true,
  });

  it('a tenant at its limit waits, then runs; other tenants are not held up', async () => {
    const ns = stack.namespace;
    const a1 = await stack.client.submit({ id: `${ns}-a1`, tenant: 'a', image, steps: [append('a1', 6)] });
    for await (const item of stack.client.follow(a1.jobId)) if (item.type === 'step-started') break;
    const a2 = await stack.client.submit({ id: `${ns}-a2`, tenant: 'a', image, steps: [append('a2')] });
    const b1 = await stack.client.submit({ id: `${ns}-b1`, tenant: 'b', image, steps: [append('b1')] });
    const records = await waitAll(stack.client, [a1.jobId, a2.jobId, b1.jobId], 60_000);
    const outcomes = [...records.values()].map((r) => `${r.state}${r.reason ? ` (${r.reason})` : ''}`);
    expect(
      outcomes.every((o) => o.startsWith('succeeded')),
      outcomes.join('; '),
    ).toBe(true);
    const lines = readFileSync(order, 'utf8').trim().split('\n');
    expect(lines.indexOf('a2 start')).toBeGreaterThan(lines.indexOf('a1 end'));
    // b1 (another tenant) did not wait for a1's slot.
    expect(lines.indexOf('b1 start')).toBeLessThan(lines.indexOf('a1 end'));
  });

  it('starts waiting jobs in priority order', async () => {
    const ns = stack.namespace;
    const file = join(scratch, 'priority.txt');
    const mark = (name: string) => ({ command: `echo ${name} >> ${file}`, shell: true });
    const blocker = await stack.client.submit({
      id: `${ns}-blk`,
      tenant: 'p',
      image,
      steps: [{ command: 'sleep', args: ['2'] }],
    });
    for await (const item of stack.client.follow(blocker.jobId)) if (item.type === 'step-started') break;
    const ids: string[] = [];
    for (const [name, priority] of [
      ['low1', 10],
      ['low2', 10],
      ['high1', 90],
      ['mid1', 50],
      ['high2', 90],
    ] as const) {
      ids.push(
        (
          await stack.client.submit({
            id: `${ns}-${name}`,
            tenant: 'p',
            priority,
            image,
            steps: [mark(name)],
          })
        ).jobId,
      );
    }
    const records = await waitAll(stack.client, [blocker.jobId, ...ids], 60_000);
    const outcomes = [...records.values()].map(
      (r) => `${r.id}: ${r.state}${r.reason ? ` (${r.reason})` : ''}`,
    );
    expect(
      outcomes.every((o) => o.includes('succeeded')),
      outcomes.join('; '),
    ).toBe(true);
    expect(readFileSync(file, 'utf8').trim().split('\n')).toEqual(['high1', 'high2', 'mid1', 'low1', 'low2']);
  });
});
