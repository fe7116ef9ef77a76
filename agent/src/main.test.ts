import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { testRedisUrl } from '@sandstream/test-support';
import { decodeCompletionNotice, Limits, type StepInput, sandboxKeys } from '@sandstream/wire';
import { describe, expect, it, vi } from 'vitest';
import {
  deleteKeys,
  POLL,
  popResult,
  pushStep,
  readEvents,
  startAgent,
  stopAgent,
  takeResult,
  uniqueJobId,
} from './testing/agent-harness.js';
import { useTestRedis } from './testing/test-redis.js';

const exec = promisify(execFile);
const { redis, cleanups } = useTestRedis();

/** The two smoke-test steps of seeds/000, verbatim (newlines and all). */
const SEED_ECHO = `{
  "schemaVersion":1,
  "stepId":"00000000-0000-0000-0000-000000000001",
  "kind":"run",
  "command":"echo",
  "args":["hello"],
  "timeoutSeconds":10
}`;
const SEED_SHUTDOWN = `{
  "schemaVersion":1,
  "stepId":"00000000-0000-0000-0000-000000000002",
  "kind":"shutdown"
}`;

describe('seeds/000 smoke 1, through the real redis-cli', () => {
  it('runs echo hello, streams it, answers, and exits 0 on shutdown', async () => {
    const jobId = uniqueJobId('smoke-test');
    const agent = startAgent({
      bareArgs: true,
      jobId,
      extraArgs: ['--redis-url', 'redis://localhost:6379', '--job-id', jobId, '--verbose'],
    });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    await vi.waitUntil(async () => ((await redis.exists(agent.keys.heartbeat)) ? true : undefined), POLL);

    await exec('redis-cli', ['LPUSH', `sandbox:${jobId}:in`, SEED_ECHO]);
    await vi.waitUntil(
      async () => ((await redis.llen(`sandbox:${jobId}:results`)) > 0 ? true : undefined),
      POLL,
    );
    const { stdout: events } = await exec('redis-cli', ['XRANGE', `sandbox:${jobId}:events`, '-', '+']);
    const { stdout: results } = await exec('redis-cli', ['LRANGE', `sandbox:${jobId}:results`, '0', '-1']);

    const eventLines = events.split('\n').filter((l) => l.startsWith('{'));
    expect(eventLines.map((l) => JSON.parse(l))).toMatchObject([
      { schemaVersion: 1, stepId: '00000000-0000-0000-0000-000000000001', kind: 'started', seq: 0 },
      { kind: 'stdout', seq: 1, line: 'hello' },
      { kind: 'completed', seq: 2, exitCode: 0, droppedLines: 0 },
    ]);
    const result = JSON.parse(results.trim());
    expect(result).toMatchObject({
      schemaVersion: 1,
      stepId: '00000000-0000-0000-0000-000000000001',
      exitCode: 0,
      timedOut: false,
      errorMessage: null,
      droppedLines: 0,
      // One line of output: the `completed` event's seq minus one.
      outputLines: 1,
    });
    expect(result.durationSeconds).toBeGreaterThan(0);
    // Timestamps as seeds/000 prints them: ISO 8601 with milliseconds.
    expect(JSON.parse(eventLines[1] as string).timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}/);

    await exec('redis-cli', ['LPUSH', `sandbox:${jobId}:in`, SEED_SHUTDOWN]);
    expect(await agent.exited).toEqual({ code: 0, signal: null });
    const first = await popResult(redis, agent.keys);
    const shutdown = await popResult(redis, agent.keys);
    expect(first.stepId).toBe('00000000-0000-0000-0000-000000000001');
    expect(shutdown).toMatchObject({ stepId: '00000000-0000-0000-0000-000000000002', exitCode: 0 });
    expect(await redis.exists(agent.keys.heartbeat)).toBe(0);
    // --verbose: debug lines are present.
    expect(agent.logs().some((l) => l.level === 'debug')).toBe(true);
  });
});

describe('the job loop', () => {
  it('writes the heartbeat before taking the first step, with a TTL of 3 intervals', async () => {
    const agent = startAgent({ extraArgs: ['--heartbeat-interval-ms', '200'] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    const beat = await vi.waitUntil(async () => (await redis.get(agent.keys.heartbeat)) ?? undefined, POLL);
    expect(JSON.parse(beat)).toMatchObject({ pid: agent.child.pid, stepId: null });
    const ttl = await redis.pttl(agent.keys.heartbeat);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(600);
    // While a step runs the heartbeat names it.
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'sleeper', command: 'sleep', args: ['2'] });
    await vi.waitUntil(async () => {
      const value = JSON.parse((await redis.get(agent.keys.heartbeat)) ?? '{}') as { stepId?: string };
      return value.stepId === 'sleeper' ? true : undefined;
    }, POLL);
    // Refreshed: well past one TTL (600 ms) it is still there.
    await new Promise((r) => setTimeout(r, 800));
    expect(await redis.exists(agent.keys.heartbeat)).toBe(1);
    await popResult(redis, agent.keys);
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
    expect(await redis.exists(agent.keys.heartbeat)).toBe(0);
  });

  it('writes its first heartbeat before it takes a step that was queued before it started', async () => {
    const jobId = uniqueJobId();
    const keys = sandboxKeys(jobId);
    await pushStep(redis, keys, { schemaVersion: 1, stepId: 'early', command: 'true' });
    // A long interval keeps the first beat's value in place for the comparison below.
    const agent = startAgent({ jobId, extraArgs: ['--heartbeat-interval-ms', '60000'] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    await popResult(redis, agent.keys);
    const beat = JSON.parse((await redis.get(agent.keys.heartbeat)) ?? '{}') as { time: string };
    const started = (await readEvents(redis, agent.keys, 'early')).find((e) => e.kind === 'started');
    expect(Date.parse(beat.time)).toBeLessThanOrEqual(Date.parse(started?.timestamp ?? ''));
    expect(await redis.pttl(agent.keys.heartbeat)).toBeGreaterThan(170_000);
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  });

  it('runs queued steps in FIFO order', async () => {
    const agent = startAgent();
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    for (let i = 0; i < 8; i++) {
      await pushStep(redis, agent.keys, {
        schemaVersion: 1,
        stepId: `s${i}`,
        command: 'echo',
        args: [`n${i}`],
      });
    }
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'end', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
    const order: (string | null)[] = [];
    for (let i = 0; i < 9; i++) order.push((await popResult(redis, agent.keys)).stepId);
    expect(order).toEqual(['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7', 'end']);
    const started = (await readEvents(redis, agent.keys))
      .filter((e) => e.kind === 'started')
      .map((e) => e.stepId);
    expect(started).toEqual(['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7']);
  });

  it('answers a step over the wire limit with its stepId, so the dispatcher can match it', async () => {
    const agent = startAgent();
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    const huge = 'x'.repeat(Limits.messageMaxBytes);
    await pushStep(
      redis,
      agent.keys,
      `{"schemaVersion":1,"stepId":"too-big","command":"echo","args":["${huge}"]}`,
    );
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'after', command: 'echo', args: ['ok'] });
    const refused = await popResult(redis, agent.keys);
    expect(refused).toMatchObject({ stepId: 'too-big', errorCode: 'invalid_step' });
    expect(refused.errorMessage).toMatch(/^step is 16,777,2\d\d bytes, over the limit of 16,777,216$/);
    expect(await popResult(redis, agent.keys)).toMatchObject({ stepId: 'after', exitCode: 0 });
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  });

  it('runs every step kind end to end', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'agent-kinds-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'present.txt'), 'alpha\nneedle here\nomega\n');
    const agent = startAgent({ extraArgs: ['--workdir', dir] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    const steps: StepInput[] = [
      {
        schemaVersion: 1,
        stepId: 'run',
        kind: 'run',
        command: 'sh',
        args: ['-c', 'echo out; echo err >&2; exit 3'],
      },
      { schemaVersion: 1, stepId: 'shell', kind: 'run', command: 'echo hi | tr a-z A-Z', shell: true },
      { schemaVersion: 1, stepId: 'write', kind: 'writeFile', path: 'sub/new.txt', content: 'written\n' },
      { schemaVersion: 1, stepId: 'read', kind: 'readFile', path: 'present.txt' },
      { schemaVersion: 1, stepId: 'list', kind: 'listFiles', path: '.', maxDepth: 2 },
      { schemaVersion: 1, stepId: 'grep', kind: 'grep', pattern: 'needle', path: '.' },
      { schemaVersion: 1, stepId: 'missing', kind: 'readFile', path: 'absent.txt' },
      { schemaVersion: 1, stepId: 'nocmd', kind: 'run', command: 'definitely-not-a-command-xyz' },
      { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' },
    ];
    for (const step of steps) await pushStep(redis, agent.keys, step);
    expect((await agent.exited).code).toBe(0);
    const results = new Map<string, Awaited<ReturnType<typeof popResult>>>();
    for (const _ of steps) {
      const result = await popResult(redis, agent.keys);
      results.set(result.stepId ?? '', result);
    }
    expect(results.get('run')).toMatchObject({ exitCode: 3, timedOut: false });
    const runEvents = await readEvents(redis, agent.keys, 'run');
    expect(runEvents.filter((e) => e.kind === 'stdout').map((e) => e.line)).toEqual(['out']);
    expect(runEvents.filter((e) => e.kind === 'stderr').map((e) => e.line)).toEqual(['err']);
    expect(runEvents.at(-1)).toMatchObject({ kind: 'completed', exitCode: 3 });
    const shellEvents = await readEvents(redis, agent.keys, 'shell');
    expect(shellEvents.find((e) => e.kind === 'stdout')?.line).toBe('HI');
    expect(results.get('write')).toMatchObject({ exitCode: 0, output: { kind: 'writeFile' } });
    expect(await readFile(join(dir, 'sub/new.txt'), 'utf8')).toBe('written\n');
    expect(results.get('read')).toMatchObject({
      exitCode: 0,
      output: { kind: 'readFile', content: 'alpha\nneedle here\nomega\n' },
    });
    const list = results.get('list')?.output;
    expect(list?.kind).toBe('listFiles');
    if (list?.kind === 'listFiles') {
      expect(list.entries.map((e) => e.path).sort()).toEqual(['present.txt', 'sub', 'sub/new.txt']);
    }
    const grep = results.get('grep')?.output;
    expect(grep?.kind).toBe('grep');
    if (grep?.kind === 'grep') {
      expect(grep.matches).toEqual([
        expect.objectContaining({ path: 'present.txt', line: 2, text: 'needle here' }),
      ]);
    }
    expect(results.get('missing')).toMatchObject({ exitCode: null, errorCode: 'not_found' });
    expect(results.get('nocmd')).toMatchObject({ errorCode: 'spawn_failed' });
    expect(results.get('bye')).toMatchObject({ exitCode: 0 });
  });

  it('answers 1,000 malformed or mutated messages and keeps running', { timeout: 400_000 }, async () => {
    const agent = startAgent({ extraArgs: ['--idle-timeout-seconds', '300'] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    const messages = malformedMessages(1000);
    const pipeline = redis.pipeline();
    for (const message of messages) pipeline.lpush(agent.keys.in, message.raw);
    await pipeline.exec();
    const results = [];
    // A guard against a wedged loop, not a speed bound: on a loaded 2-core CI machine one of the
    // thousand (a spawn among them) has taken over 30 s.
    for (let i = 0; i < messages.length; i++) results.push(await popResult(redis, agent.keys, 120));
    expect(results).toHaveLength(1000);
    // Each answer lines up with its message (FIFO), and readable step ids are echoed.
    for (const [i, message] of messages.entries()) {
      const result = results[i];
      if (message.expectInvalid) {
        expect(result, message.raw.slice(0, 200)).toMatchObject({
          errorCode: 'invalid_step',
          stepId: message.stepId,
        });
        expect(result?.errorMessage).toBeTruthy();
      }
    }
    expect(agent.child.exitCode).toBeNull();
    expect(await redis.exists(agent.keys.heartbeat)).toBe(1);
    await pushStep(redis, agent.keys, {
      schemaVersion: 1,
      stepId: 'still-alive',
      command: 'echo',
      args: ['ok'],
    });
    expect(await popResult(redis, agent.keys)).toMatchObject({ stepId: 'still-alive', exitCode: 0 });
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  });

  it('XADDs a CompletionNotice after each result when --notify-stream is set (tagged keys)', async () => {
    const notify = `agent-test-notify-${uniqueJobId()}`;
    const agent = startAgent({ keyStyle: 'tagged', extraArgs: ['--notify-stream', notify] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    cleanups.push(() => redis.del(notify));
    expect(agent.keys.in).toBe(`sandbox:{${agent.jobId}}:in`);
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'a', command: 'true' });
    await pushStep(redis, agent.keys, 'not json');
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'z', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
    const notices = (await redis.xrange(notify, '-', '+')).map(([, fields]) =>
      decodeCompletionNotice(fields),
    );
    expect(notices).toEqual([
      { jobId: agent.jobId, stepId: 'a' },
      { jobId: agent.jobId, stepId: '' },
      { jobId: agent.jobId, stepId: 'z' },
    ]);
    // Each result on its step's own key, the one the dispatcher reads; one with no step id
    // (the step was not JSON) has no key and goes to the list.
    expect(await takeResult(redis, agent.keys, 'a')).toMatchObject({ exitCode: 0 });
    expect(await takeResult(redis, agent.keys, 'z')).toMatchObject({ exitCode: 0 });
    expect(await redis.llen(agent.keys.results)).toBe(1);
  });

  it('keeps going when the notify stream cannot be written (wrong type)', async () => {
    const notify = `agent-test-notify-${uniqueJobId()}`;
    await redis.set(notify, 'not a stream');
    cleanups.push(() => redis.del(notify));
    const agent = startAgent({ extraArgs: ['--notify-stream', notify] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'a', command: 'true' });
    expect(await takeResult(redis, agent.keys, 'a')).toMatchObject({ stepId: 'a', exitCode: 0 });
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'b', command: 'true' });
    expect(await takeResult(redis, agent.keys, 'b')).toMatchObject({ stepId: 'b', exitCode: 0 });
    expect(agent.stderr()).toMatch(/completion notice not written.*WRONGTYPE/);
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  });

  it('exits 2 after its idle limit, deleting the heartbeat', async () => {
    const agent = startAgent({ extraArgs: ['--idle-timeout-seconds', '0.2', '--max-idle-waits', '3'] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    const started = Date.now();
    expect(await agent.exited).toEqual({ code: 2, signal: null });
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(550);
    expect(elapsed).toBeLessThan(5000);
    expect(await redis.exists(agent.keys.heartbeat)).toBe(0);
  });

  it('survives a wrong-typed :in key (WRONGTYPE) and ends by its idle limit', async () => {
    const jobId = uniqueJobId();
    await redis.set(`sandbox:${jobId}:in`, 'not a list');
    const agent = startAgent({
      jobId,
      extraArgs: ['--idle-timeout-seconds', '0.2', '--max-idle-waits', '3'],
    });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    expect((await agent.exited).code).toBe(2);
    expect(agent.stderr()).toMatch(/WRONGTYPE/);
  });

  it('takes its settings from the environment', async () => {
    const jobId = uniqueJobId();
    const agent = startAgent({
      bareArgs: true,
      jobId,
      env: {
        REDIS_URL: testRedisUrl(),
        JOB_ID: jobId,
        AGENT_IDLE_TIMEOUT_SECONDS: '0.1',
        AGENT_MAX_IDLE_WAITS: '1',
      },
    });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    expect((await agent.exited).code).toBe(2);
  });

  it.each([
    ['exits at once', 'exit 3'],
    ['never answers', 'exec sleep 30'],
  ])('runs its steps through child_process when the spawner helper %s', async (_what, body) => {
    const dir = await mkdtemp(join(tmpdir(), 'sandstream-bad-spawner-'));
    const helper = join(dir, 'spawner');
    await writeFile(helper, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    const agent = startAgent({ extraArgs: ['--spawner', helper] });
    cleanups.push(
      () => rm(dir, { recursive: true, force: true }),
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'hi', command: 'echo', args: ['hi'] });
    expect(await popResult(redis, agent.keys)).toMatchObject({ stepId: 'hi', exitCode: 0 });
    expect(agent.logs()).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        msg: 'the spawner helper did not answer; run steps start through node:child_process',
        path: helper,
      }),
    );
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  });

  it.each([
    [['--redis-url', 'redis://127.0.0.1:6379', '--job-id', 'bad id'], /--job-id/],
    [
      ['--redis-url', 'redis://127.0.0.1:6379', '--job-id', 'x', '--max-idle-waits', 'many'],
      /--max-idle-waits/,
    ],
    [['--job-id', 'x'], /--redis-url/],
    [['--redis-url', 'redis://127.0.0.1:6379', '--job-id', 'x', '--frobnicate'], /--frobnicate/],
    [
      ['--redis-url', 'redis://127.0.0.1:6379', '--job-id', 'x', '--workdir', '/nonexistent/dir'],
      /--workdir/,
    ],
  ])('exits 3 naming the flag for %j', async (args, message) => {
    const agent = startAgent({ bareArgs: true, extraArgs: args, env: { REDIS_URL: '', JOB_ID: '' } });
    expect((await agent.exited).code).toBe(3);
    expect(agent.stderr()).toMatch(message);
  });
});

interface Malformed {
  raw: string;
  /** The agent must refuse it as invalid_step (mutations may by chance stay valid). */
  expectInvalid: boolean;
  stepId: string | null;
}

/** Deterministic junk: hand-picked breakages plus seeded random byte mutations of valid steps. */
function malformedMessages(count: number): Malformed[] {
  let seed = 42;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const fixed: Malformed[] = [
    { raw: '', expectInvalid: true, stepId: null },
    { raw: 'null', expectInvalid: true, stepId: null },
    { raw: '[]', expectInvalid: true, stepId: null },
    { raw: '"a string"', expectInvalid: true, stepId: null },
    { raw: '{', expectInvalid: true, stepId: null },
    { raw: '{"schemaVersion":1,"stepId":"m1","kind":"explode"}', expectInvalid: true, stepId: 'm1' },
    {
      raw: '{"schemaVersion":2,"stepId":"m2","kind":"run","command":"true"}',
      expectInvalid: true,
      stepId: 'm2',
    },
    { raw: '{"stepId":"m3","kind":"run","command":"true"}', expectInvalid: true, stepId: 'm3' },
    { raw: '{"schemaVersion":1,"stepId":"m4","kind":"run"}', expectInvalid: true, stepId: 'm4' },
    {
      raw: '{"schemaVersion":1,"stepId":"m5","command":"true","timeoutSeconds":-1}',
      expectInvalid: true,
      stepId: 'm5',
    },
    {
      raw: '{"schemaVersion":1,"stepId":"m6","command":"true","args":"nope"}',
      expectInvalid: true,
      stepId: 'm6',
    },
    { raw: '{"schemaVersion":1,"stepId":"m7","kind":"readFile"}', expectInvalid: true, stepId: 'm7' },
    {
      raw: '{"schemaVersion":1,"stepId":"m8","kind":"grep","pattern":"x","maxMatches":1e9}',
      expectInvalid: true,
      stepId: 'm8',
    },
    { raw: '{"schemaVersion":1,"stepId":"","kind":"shutdown"}', expectInvalid: true, stepId: null },
    { raw: '{"schemaVersion":1,"stepId":7,"kind":"shutdown"}', expectInvalid: true, stepId: null },
    {
      raw: '{"schemaVersion":1,"stepId":"m9","kind":"shutdown","__proto__":{"x":1},"kind2":null}',
      expectInvalid: false,
      stepId: 'm9',
    },
    { raw: '\u0000\u0001\u0002', expectInvalid: true, stepId: null },
    {
      raw: `{"schemaVersion":1,"stepId":"m10","command":"${'x'.repeat(70_000)}"}`,
      expectInvalid: true,
      stepId: 'm10',
    },
  ];
  // m9 is a valid shutdown: keep it out, the loop must keep running.
  const list = fixed.filter((m) => m.stepId !== 'm9');
  const bases = [
    '{"schemaVersion":1,"stepId":"b1","kind":"run","command":"true","args":[],"timeoutSeconds":5}',
    '{"schemaVersion":1,"stepId":"b2","kind":"listFiles","path":".","maxDepth":1}',
    '{"schemaVersion":1,"stepId":"b3","kind":"readFile","path":"/etc/hostname"}',
    '{"schemaVersion":1,"stepId":"b4","kind":"grep","pattern":"zzzz","path":"/etc/hostname"}',
  ];
  while (list.length < count) {
    const base = bases[list.length % bases.length] as string;
    const chars = [...base];
    const edits = 1 + Math.floor(random() * 3);
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(random() * chars.length);
      const op = random();
      if (op < 0.4) chars.splice(at, 1);
      else if (op < 0.8) chars[at] = String.fromCharCode(32 + Math.floor(random() * 95));
      else chars.splice(at, 0, '{"[]}:,'.charAt(Math.floor(random() * 7)));
    }
    const raw = chars.join('');
    // Skip mutations that happen to spell a shutdown or a long-running step.
    if (raw.includes('shutdown') || /"timeoutSeconds":\s*\d{2,}/.test(raw)) continue;
    list.push({ raw, expectInvalid: false, stepId: null });
  }
  return list;
}
