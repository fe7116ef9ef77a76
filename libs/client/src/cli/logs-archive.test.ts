import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKeySpace, JobSpecSchema, JobStore, logArchiveNames } from '@sandstream/bus';
import {
  connectTestRedis,
  deleteNamespaceKeys,
  NatsServer,
  repoRoot,
  testRedisUrl,
  uniqueNamespace,
} from '@sandstream/test-support';
import {
  connect,
  DiscardPolicy,
  headers,
  type JetStreamClient,
  type NatsConnection,
  nanos,
  RetentionPolicy,
  StorageType,
} from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stepEventFields as event } from '../testing/step-events.js';

// `sandstream logs` as a user runs it (the built CLI: npx tsc -b libs/client), on a job whose
// Redis stream is gone or trimmed and whose log a private JetStream holds in the archiver's
// format (issue 16 contract, section B), published here by hand.
const namespace = uniqueNamespace('logs');
const keys = createKeySpace(namespace);
const redis = connectTestRedis();
const store = new JobStore({ redis, keys });
const names = logArchiveNames({ namespace });
// No local.json is found from here: the connection comes from the flags and variables alone.
const cwd = mkdtempSync(join(tmpdir(), 'logs-archive-'));
let nats: NatsServer;
let nc: NatsConnection;
let js: JetStreamClient;

beforeAll(async () => {
  nats = await NatsServer.start();
  nc = await connect({ servers: nats.url });
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({
    name: names.stream,
    subjects: [names.subjects],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(7 * 24 * 3600 * 1000),
    duplicate_window: nanos(120_000),
  });
  js = nc.jetstream();
});

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
  rmSync(cwd, { recursive: true, force: true });
});

function cli(env: Record<string, string>, ...args: string[]) {
  const { REDIS_URL: _r, NATS_URL: _n, SANDSTREAM_NAMESPACE: _s, ...rest } = process.env;
  return spawnSync(process.execPath, [join(repoRoot, 'libs/client/dist/cli/main.js'), ...args], {
    env: {
      ...rest,
      REDIS_URL: testRedisUrl(),
      SANDSTREAM_NAMESPACE: namespace,
      ...env,
    },
    cwd,
    encoding: 'utf8',
    timeout: 60_000,
  });
}

/**
 * A finished two-step job as the agent and the services leave it in Redis: step-1 prints
 * `lines` lines, step-2 three, then the job succeeds. Returns the job id and its stream entries.
 */
async function finishedJob(
  name: string,
  lines: number,
): Promise<{ jobId: string; entries: [string, string[]][] }> {
  const { jobId } = await store.create(
    JobSpecSchema.parse({
      id: `${namespace}-${name}`,
      image: 'none',
      steps: [{ command: 'seq', args: [String(lines)] }, { command: 'true' }],
    }),
  );
  for (const [from, to] of [
    ['queued', 'scheduled'],
    ['scheduled', 'starting'],
    ['starting', 'running'],
  ] as const)
    await store.transition(jobId, [from], to);
  const stream = keys.sandbox(jobId).events;
  const pipeline = redis.pipeline();
  const add = (fields: [string, string]) => pipeline.xadd(stream, '*', ...fields);
  add(event('step-1', 'started', 0));
  for (let seq = 1; seq <= lines; seq++) add(event('step-1', 'stdout', seq));
  add(event('step-1', 'completed', lines + 1, { exitCode: 0 }));
  add(event('step-2', 'started', 0));
  for (let seq = 1; seq <= 3; seq++) add(event('step-2', 'stdout', seq));
  add(event('step-2', 'completed', 4, { exitCode: 0 }));
  await pipeline.exec();
  await store.transition(jobId, ['running'], 'succeeded');
  const entries = (await redis.xrange(stream, '-', '+')) as [string, string[]][];
  return { jobId, entries };
}

/** Publishes entries as the archiver does: runs of `batch`, Nats-Msg-Id from each run's first id. */
async function archive(jobId: string, entries: [string, string[]][], batch: number): Promise<void> {
  for (let i = 0; i < entries.length; i += batch) {
    const run = entries.slice(i, i + batch);
    const h = headers();
    h.set('Sandstream-Job-Id', jobId);
    h.set('Sandstream-Last-Entry', run[run.length - 1]?.[0] ?? '');
    await js.publish(names.subject(jobId), JSON.stringify({ entries: run }), {
      msgID: `${namespace}:${jobId}:${run[0]?.[0]}`,
      headers: h,
    });
  }
}

async function archiveComplete(jobId: string): Promise<void> {
  const h = headers();
  h.set('Sandstream-Job-Id', jobId);
  h.set('Sandstream-Complete', '1');
  await js.publish(names.subject(jobId), JSON.stringify({ entries: [], complete: true }), {
    msgID: `${namespace}:${jobId}:complete`,
    headers: h,
  });
}

/** What `logs` prints on stdout for the job of finishedJob(). */
function expectedOutput(lines: number, header: string): string[] {
  return [
    `▶ step-1  ${header}`,
    ...Array.from({ length: lines }, (_, i) => `step-1 line ${i + 1}`),
    '◀ step-1  exit 0',
    `▶ step-2  ${header === 'step-1' ? 'step-2' : 'run: true'}`,
    'step-2 line 1',
    'step-2 line 2',
    'step-2 line 3',
    '◀ step-2  exit 0',
  ];
}

describe('sandstream logs and the log archive', () => {
  it('reads a job whose keys are gone from the archive: every line in order, none twice, and says so', async () => {
    const { jobId, entries } = await finishedJob('gone', 2500);
    await archive(jobId, entries, 500);
    // An archiver that crashed after publishing and started again from an earlier entry.
    await archive(jobId, entries.slice(700, 1300), 400);
    await archiveComplete(jobId);
    await store.delete(jobId);
    expect(await redis.exists(keys.sandbox(jobId).events, keys.job(jobId))).toBe(0);

    const run = cli({}, 'logs', jobId, '--nats-url', nats.url);
    expect(run.stderr).toContain(`sandstream: output from the log archive (${nats.url})\n`);
    expect(run.status).toBe(0);
    expect(run.stdout.split('\n').slice(0, -1)).toEqual(expectedOutput(2500, 'step-1'));
    // The final state comes from the archived timeline, the record being gone.
    expect(run.stderr).toMatch(/● succeeded\n$/);
    // $NATS_URL serves as well as the flag.
    expect(cli({ NATS_URL: nats.url }, 'logs', jobId).stdout).toBe(run.stdout);
    // Without an archive configured the job is simply not found, as before.
    const without = cli({}, 'logs', jobId);
    expect(without.status).toBe(4);
    expect(without.stderr).toContain(`job ${jobId} not found`);
  });

  it('reads what the archive has, then the rest from Redis, when Redis was trimmed under a job still archiving', async () => {
    const { jobId, entries } = await finishedJob('trimmed', 1000);
    // Archived up to entry 700; Redis trimmed to keep the archived entries from 601 on.
    await archive(jobId, entries.slice(0, 700), 250);
    await redis.xtrim(keys.sandbox(jobId).events, 'MINID', entries[600]?.[0] as string);
    const run = cli({}, 'logs', jobId, '--nats-url', nats.url);
    expect(run.status).toBe(0);
    expect(run.stderr).toContain(
      `sandstream: output from the log archive (${nats.url})\nsandstream: the rest from Redis\n`,
    );
    expect(run.stdout.split('\n').slice(0, -1)).toEqual(expectedOutput(1000, 'run: seq 1000'));
    expect(run.stderr).toMatch(/● succeeded\n$/);
  });

  it('reads Redis alone, as before, when no archive is configured, and marks what the cap took', async () => {
    const { jobId, entries } = await finishedJob('redis', 50);
    const whole = cli({}, 'logs', jobId);
    expect(whole.status).toBe(0);
    expect(whole.stdout.split('\n').slice(0, -1)).toEqual(expectedOutput(50, 'run: seq 50'));
    expect(whole.stderr).toBe('● succeeded\n');
    // With an archive configured but Redis holding everything, Redis it is, and it says so.
    const told = cli({}, 'logs', jobId, '--nats-url', nats.url);
    expect(told.stdout).toBe(whole.stdout);
    expect(told.stderr).toBe('sandstream: output from Redis\n● succeeded\n');
    // The stream capped with no archive to fall back on: the missing start is marked.
    await redis.xtrim(keys.sandbox(jobId).events, 'MINID', entries[30]?.[0] as string);
    const trimmed = cli({}, 'logs', jobId);
    expect(trimmed.status).toBe(0);
    expect(trimmed.stderr).toMatch(
      /Redis no longer holds the start of this job's log and no log archive is configured/,
    );
    const shown = trimmed.stdout.split('\n').slice(0, -1);
    // Entries 0..3 are the job's state changes and entry 4 step-1's start: line 26 is the first left.
    expect(shown.slice(0, 3)).toEqual([
      '▶ step-1  run: seq 50  (its start was trimmed from the log)',
      '… 25 lines not shown …',
      'step-1 line 26',
    ]);
    expect(shown.slice(3)).toEqual(expectedOutput(50, 'run: seq 50').slice(27));
  });
});
