/**
 * How long one sandbox flooding its own keys can block Redis for every tenant (issue 17 §2): the
 * longest command in SLOWLOG during a steady workload, alone and while an attacker sandbox
 * floods, in one run on a private redis-server with the four services as processes on the
 * in-process backend (per-sandbox Redis users on, SANDBOX_ACL=on).
 *
 * Workload: a few live sandboxes, each running `exec(['true'])` in a loop. Attacker: one more live
 * sandbox whose step reads its agent's REDIS_URL (the per-sandbox ACL user and password) out of
 * /proc, as a malicious step would; with that user the attacker LPUSHes 100,000 forged results to
 * its own results list (in batches) and keeps XADDing forged completion notices naming its own
 * job to the shared completion stream, so the dispatcher's advance script runs against the flood
 * again and again. Every forged result names the forged step (nested: a script that searched the
 * list would have to decode it to see it is not the step's result); the advance script now reads
 * only the step's own result key, so none of the list is read at all.
 *
 * SLOWLOG records every command (slowlog-log-slower-than 0); it is reset before each phase and
 * read after it. Printed: the longest command alone and under the flood (goal <= 2x), the p99 of
 * command durations, the longest command not sent by the attacker itself, and `exec('true')` p50.
 *
 *   npm run build && npx vite-node test/bench/redis-flood.bench.ts [rounds] [sandboxes] [entries] [entryBytes]
 *     [noticesPer50ms]
 */
import { readdirSync } from 'node:fs';
import { busLua, SANDBOX_USER_PREFIX } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import {
  percentile,
  startRedisServer,
  startServices,
  summarize,
  uniqueNamespace,
} from '@sandstream/test-support';
import { encodeCompletionNotice, type KeyStyle, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';

const ROUNDS = Number(process.argv[2] ?? 300);
const SANDBOXES = Number(process.argv[3] ?? 3);
const FLOOD_ENTRIES = Number(process.argv[4] ?? 100_000);
/** About how large each forged result is (JSON bytes); 100,000 of ~200 B stay far under the budget. */
const ENTRY_BYTES = Number(process.argv[5] ?? 200);
/** Batches of 1,000 entries or 1 MiB, whichever is smaller: the attacker's own LPUSHes stay short. */
const FLOOD_BATCH = Math.max(1, Math.min(1_000, Math.floor((1024 * 1024) / ENTRY_BYTES)));
/** Forged notices per pipeline, and the pause between pipelines (20 per 50 ms: about 400/s). */
const NOTICES_PER_BURST = Number(process.argv[6] ?? 20);
const BURST_PAUSE_MS = 50;
const FORGED_STEP = 'forged-step';
const ms = (n: number) => `${n.toFixed(2)} ms`;

type Client = SandstreamClient;
type Sandbox = Awaited<ReturnType<Client['sandboxes']['create']>>;

interface SlowEntry {
  us: number;
  command: string;
  client: string;
}

/** Script SHA -> name, for every Lua script of the bus and the services (evalsha in SLOWLOG). */
function scriptNames(): Map<string, string> {
  const names = new Map<string, string>();
  for (const service of ['step-dispatcher', 'reaper', 'scheduler', 'pod-lifecycle', null]) {
    const dir = service
      ? new URL(`../../services/${service}/src/lua/`, import.meta.url)
      : new URL('../../libs/bus/src/lua/', import.meta.url);
    let files: string[];
    try {
      files = readdirSync(dir).filter((f) => f.endsWith('.lua'));
    } catch {
      continue;
    }
    const loader = busLua.extend(dir);
    for (const file of files) {
      const name = file.replace(/-\d+\.lua$/, '');
      names.set(loader.load(name).sha, name);
    }
  }
  return names;
}
const SCRIPTS = scriptNames();

const sleep = (t: number) => new Promise((r) => setTimeout(r, t));

/** Each sandbox runs `exec(['true'])` `rounds` times, all side by side; the round trips. */
async function workload(sandboxes: Sandbox[], rounds: number): Promise<number[]> {
  const latencies: number[] = [];
  await Promise.all(
    sandboxes.map(async (sandbox) => {
      for (let i = 0; i < rounds; i++) {
        const t = performance.now();
        const r = await sandbox.exec(['true']);
        if (r.exitCode !== 0) throw new Error(`exec('true') in ${sandbox.id} exited ${r.exitCode}`);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return latencies;
}

/** Every command SLOWLOG kept since the last reset, the bench's own admin connection left out. */
async function slowlog(admin: Redis): Promise<SlowEntry[]> {
  const raw = (await admin.call('SLOWLOG', 'GET', '-1')) as [
    number,
    number,
    number,
    string[],
    string,
    string,
  ][];
  return raw
    .filter((e) => e[5] !== 'bench-admin')
    .map((e) => ({
      us: Number(e[2]),
      command: commandName(e[3]),
      client: e[5] || e[4],
    }));
}

function commandName(args: string[]): string {
  const name = (args[0] ?? '?').toLowerCase();
  if (name === 'evalsha') return `evalsha ${SCRIPTS.get(args[1] ?? '') ?? args[1]}`;
  return name;
}

/** The commands that took longest at their worst: count, p50, p99 and max per command. */
function byCommand(entries: SlowEntry[], top: number): string[] {
  const groups = new Map<string, number[]>();
  for (const e of entries) {
    const us = groups.get(e.command) ?? [];
    us.push(e.us);
    groups.set(e.command, us);
  }
  return [...groups.entries()]
    .map(([command, us]) => ({ command, ...summarize(us), max: Math.max(...us) }))
    .sort((a, b) => b.max - a.max)
    .slice(0, top)
    .map(
      (g) =>
        `${g.command.padEnd(34)} n=${String(g.n).padStart(6)}  p50 ${g.p50} us  p99 ${g.p99} us  max ${g.max} us`,
    );
}

function longest(entries: SlowEntry[]): SlowEntry {
  return entries.reduce((a, b) => (b.us > a.us ? b : a), { us: 0, command: '-', client: '-' });
}

function pct(entries: SlowEntry[], p: number): number {
  return percentile(
    entries.map((e) => e.us).sort((a, b) => a - b),
    p,
  );
}

/** What a malicious step finds in its agent's environment: walk up from the step's shell. */
const STEAL = `p=$$
while [ "$p" -gt 1 ]; do
  if tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -q '^REDIS_URL='; then
    tr '\\0' '\\n' < /proc/$p/environ | grep -E '^(REDIS_URL|JOB_ID|AGENT_NOTIFY_STREAM|AGENT_KEY_STYLE)='
    exit 0
  fi
  p=$(awk '/^PPid:/ {print $2}' /proc/$p/status)
done
exit 1`;

interface Stolen {
  url: string;
  jobId: string;
  notifyStream: string;
  keyStyle: KeyStyle;
}

async function stealCredentials(attacker: Sandbox): Promise<Stolen> {
  const r = await attacker.exec(STEAL);
  if (r.exitCode !== 0) throw new Error(`no REDIS_URL found above the step: ${r.stderr}`);
  const env = Object.fromEntries(
    r.stdout
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  const url = env.REDIS_URL as string;
  if (!decodeURIComponent(new URL(url).username).startsWith(SANDBOX_USER_PREFIX)) {
    throw new Error('the agent does not run as a per-sandbox Redis user (SANDBOX_ACL=on?)');
  }
  return {
    url,
    jobId: env.JOB_ID as string,
    notifyStream: env.AGENT_NOTIFY_STREAM as string,
    keyStyle: (env.AGENT_KEY_STYLE ?? 'tagged') as KeyStyle,
  };
}

/**
 * Floods until `until` resolves: the 100,000 forged results in batches, a burst of forged
 * notices after each batch, then bursts of notices alone. Returns what it sent.
 */
async function flood(stolen: Stolen, until: Promise<unknown>): Promise<{ entries: number; notices: number }> {
  const redis = new Redis(stolen.url, { maxRetriesPerRequest: null });
  let done = false;
  void until.finally(() => {
    done = true;
  });
  try {
    await redis.client('SETNAME', 'attacker');
    // The user is the sandbox's own: another job's keys are refused.
    const refused = await redis.get('job:{someone-else}').then(
      () => false,
      (err: Error) => err.message.includes('NOPERM'),
    );
    if (!refused) throw new Error("the attacker's user reads keys outside its sandbox");
    const results = sandboxKeys(stolen.jobId, stolen.keyStyle).results;
    const pad = 'x'.repeat(Math.max(0, ENTRY_BYTES - 100));
    const notice = encodeCompletionNotice({ jobId: stolen.jobId, stepId: FORGED_STEP });
    let entries = 0;
    let notices = 0;
    const burst = async () => {
      const pipeline = redis.pipeline();
      for (let i = 0; i < NOTICES_PER_BURST; i++) {
        pipeline.xadd(stolen.notifyStream, 'MAXLEN', '~', 100_000, '*', ...notice);
      }
      await pipeline.exec();
      notices += NOTICES_PER_BURST;
    };
    while (!done && entries < FLOOD_ENTRIES) {
      const batch = Array.from({ length: Math.min(FLOOD_BATCH, FLOOD_ENTRIES - entries) }, (_, i) =>
        JSON.stringify({
          stepId: `flood-${entries + i}`,
          exitCode: 0,
          durationMs: 1,
          // Names the forged step as a result would (nested): a list search would have to decode it.
          inner: { stepId: FORGED_STEP },
          pad,
        }),
      );
      await redis.lpush(results, ...batch);
      entries += batch.length;
      await burst();
    }
    while (!done) {
      await burst();
      await sleep(BURST_PAUSE_MS);
    }
    return { entries, notices };
  } finally {
    redis.disconnect();
  }
}

async function main(): Promise<void> {
  const own = await startRedisServer();
  const namespace = uniqueNamespace('fbench');
  const services = await startServices({
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    // Each agent gets its own Redis user; the private Redis's `default` user stays open for the
    // services (in-process warns about that, never refuses).
    SANDBOX_ACL: 'on',
    SCHEDULER_GLOBAL_SLOTS: String(SANDBOXES + 8),
    SCHEDULER_TENANT_SLOTS: String(SANDBOXES + 8),
    LOG_LEVEL: 'warn',
  });
  const admin = new Redis(own.url, { connectionName: 'bench-admin' });
  const redis = new Redis(own.url, { connectionName: 'bench-client' });
  const client = new SandstreamClient({ redis, namespace });
  try {
    await admin.config('SET', 'slowlog-log-slower-than', '0');
    await admin.config('SET', 'slowlog-max-len', '1000000');
    const sandboxes = await Promise.all(
      Array.from({ length: SANDBOXES }, (_, i) =>
        client.sandboxes.create({ id: `${namespace}-w${i}`, image: 'none' }),
      ),
    );
    const attacker = await client.sandboxes.create({ id: `${namespace}-attacker`, image: 'none' });
    const stolen = await stealCredentials(attacker);
    // Warm both sides up first (JIT, connections); not counted.
    await workload(sandboxes, 50);

    console.log(
      `Redis SLOWLOG (every command) during ${SANDBOXES} live sandboxes x ${ROUNDS} exec('true'), in-process backend, SANDBOX_ACL=on`,
    );
    const phases: { name: string; longest: SlowEntry; others: SlowEntry; p99: number; execP50: number }[] =
      [];
    const phase = async (name: string, withFlood: boolean) => {
      await admin.call('SLOWLOG', 'RESET');
      const work = workload(sandboxes, ROUNDS);
      const sent = withFlood ? await flood(stolen, work) : undefined;
      const latencies = await work;
      const entries = await slowlog(admin);
      const mine = entries.filter((e) => e.client !== 'attacker');
      const top = longest(entries);
      const others = longest(mine);
      const exec = summarize(latencies);
      phases.push({ name, longest: top, others, p99: pct(entries, 99), execP50: exec.p50 });
      console.log(`  ${name}:`);
      if (sent) {
        const left = await redis.llen(sandboxKeys(stolen.jobId, stolen.keyStyle).results);
        console.log(
          `    flood: ${sent.entries.toLocaleString('en-US')} forged results of ~${ENTRY_BYTES} B LPUSHed in batches of ${FLOOD_BATCH}, ${sent.notices} forged notices; results list left at ${left}`,
        );
        const attackerOwn = longest(entries.filter((e) => e.client === 'attacker'));
        console.log(`    attacker's own longest command: ${attackerOwn.us} us (${attackerOwn.command})`);
      }
      console.log(
        `    commands logged: ${entries.length}, p99 ${pct(entries, 99)} us, p99.9 ${pct(entries, 99.9)} us`,
      );
      console.log(`    longest: ${top.us} us  ${top.command}  [${top.client}]`);
      console.log(
        `    longest not sent by the attacker: ${others.us} us  ${others.command}  [${others.client}]`,
      );
      for (const line of byCommand(entries, 5)) console.log(`      ${line}`);
      console.log(`    exec('true') p50 ${ms(exec.p50)}  p99 ${ms(exec.p99)}  (n=${exec.n})`);
    };
    await phase('alone', false);
    await phase('under the flood', true);
    // The attacker's teardown (its user deleted, its keys unlinked) is part of what it costs.
    await admin.call('SLOWLOG', 'RESET');
    await attacker.close();
    await sleep(2000);
    const teardown = await slowlog(admin);
    const t = longest(teardown);
    console.log(`  the attacker's close and cleanup: longest ${t.us} us  ${t.command}  [${t.client}]`);
    await phase('alone again', false);

    const [a, f] = phases as [(typeof phases)[0], (typeof phases)[0]];
    console.log(
      `  longest command, flood / alone: ${f.longest.us} / ${a.longest.us} us = ${(f.longest.us / a.longest.us).toFixed(2)}x (goal <= 2x)`,
    );
    console.log(
      `  longest command not the attacker's own, flood / alone: ${f.others.us} / ${a.others.us} us = ${(f.others.us / a.others.us).toFixed(2)}x`,
    );
    console.log(
      `  exec('true') p50, flood / alone: ${ms(f.execP50)} / ${ms(a.execP50)} = ${(f.execP50 / a.execP50).toFixed(2)}x`,
    );
    await Promise.all(sandboxes.map((s) => s.close()));
  } finally {
    await client.close();
    redis.disconnect();
    admin.disconnect();
    for (const s of services.reverse()) await s.stop();
    await own.stop();
  }
}

await main();
