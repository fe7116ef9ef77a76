/**
 * Upload and download MB/s of a tree through a live sandbox, against copying the same tree
 * without Sandstream on the same backend, in the same run (issue 15: goal >= 0.5x). The four
 * services as processes on a private redis-server; each measure taken ROUNDS times, interleaved
 * with its baseline so drift in the machine's load hits both alike; medians.
 *
 * - in-process backend: `cp -r` of the tree, and `tar -c | tar -x` between two directories of
 *   the host (what a tar transfer costs with nothing in between);
 * - Docker backend: `tar -c | docker cp - <container>:<dir>` in, and `docker cp
 *   <container>:<dir> - | tar -x` out, into and out of the same sandbox container's workspace.
 *
 * Sandstream's side is the SDK's `files.upload(dir, remoteDir)` and `files.downloadTo(remote,
 * dir)` in this process, checked file by file, and the CLI's `sandstream cp` in and out (a
 * process of its own, like `docker cp`; its start-up counted). On in-process, the CPU time the
 * SDK, the agent and Redis each spent per SDK transfer (a figure the machine's load moves less
 * than MB/s). The agent's peak RSS (VmHWM) before and after the transfers.
 *
 *   npm run build && npx vite-node test/bench/transfer.bench.ts [MB] [rounds] [backends]
 *   (backends: inprocess,docker; Docker needs an engine and the local images, npm run images)
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Sandbox, SandstreamClient } from '@sandstream/client';
import { DEFAULT_INPROCESS_REGISTRY_KEY, SandboxLabels } from '@sandstream/sandbox';
import {
  findCarrierImage,
  repoRoot,
  startRedisServer,
  startServices,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';

const MEGABYTES = Number(process.argv[2] ?? 200);
const ROUNDS = Number(process.argv[3] ?? 3);
const BACKENDS = (process.argv[4] ?? 'inprocess,docker').split(',');

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const mbs = (n: number) => `${n.toFixed(0)} MB/s`;
const mib = (kb: number) => (kb / 1024).toFixed(0);
const sh = (script: string) => execFileSync('sh', ['-c', script], { stdio: ['ignore', 'ignore', 'inherit'] });

/** `sandstream cp from to` against the stack's Redis and namespace. */
function cli(url: string, namespace: string, from: string, to: string): void {
  execFileSync(
    process.execPath,
    [
      `${repoRoot}libs/client/bin/sandstream.mjs`,
      'cp',
      '--redis-url',
      url,
      '--namespace',
      namespace,
      from,
      to,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

/** MB/s of one timed run of `work`; `reset` (untimed) runs before it. */
async function rate(work: () => unknown, reset?: () => unknown): Promise<number> {
  await reset?.();
  const t = performance.now();
  await work();
  return MEGABYTES / ((performance.now() - t) / 1000);
}

interface Measure {
  name: string;
  run: () => Promise<number>;
}

async function measureAll(measures: Measure[]): Promise<Map<string, number>> {
  const seen = new Map<string, number[]>(measures.map((m) => [m.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const m of measures) seen.get(m.name)?.push(await m.run());
  }
  return new Map([...seen].map(([name, values]) => [name, median(values)]));
}

/** CPU time of a process (ms), user + system, from /proc/<pid>/stat. */
function cpuMs(pid: string): number {
  const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
}

/** CPU ms spent by this process (the SDK), the agent and Redis during each run of a measure. */
const cpuSeen = new Map<string, number[][]>();
function withCpu(name: string, agentPid: string, redisPid: string, work: () => Promise<unknown>) {
  return async () => {
    const self = process.cpuUsage();
    const agent = cpuMs(agentPid);
    const redis = cpuMs(redisPid);
    await work();
    const used = process.cpuUsage(self);
    const row = [(used.user + used.system) / 1000, cpuMs(agentPid) - agent, cpuMs(redisPid) - redis];
    cpuSeen.set(name, [...(cpuSeen.get(name) ?? []), row]);
  };
}
const cpuLine = (name: string) => {
  const rows = cpuSeen.get(name) ?? [];
  const column = (i: number) => median(rows.map((r) => r[i] ?? 0)).toFixed(0);
  return `SDK ${column(0)}, agent ${column(1)}, Redis ${column(2)}`;
};

/** The same bytes came back, file by file. */
function checkSame(tree: string, back: string): void {
  for (let i = 0; i < MEGABYTES; i++) {
    const name = `f${i}.bin`;
    if (!readFileSync(join(tree, name)).equals(readFileSync(join(back, name)))) {
      throw new Error(`${name} came back different`);
    }
  }
}

/** Peak resident set of a process (kB), from /proc/<pid>/status, read through the sandbox. */
async function peakRssKb(sandbox: Sandbox, pid: string): Promise<number> {
  const status = await sandbox.exec(['cat', `/proc/${pid}/status`]);
  return Number(/VmHWM:\s+(\d+)/.exec(status.stdout)?.[1] ?? Number.NaN);
}

async function withStack<T>(
  url: string,
  env: Record<string, string>,
  body: (client: SandstreamClient, namespace: string, redis: Redis) => Promise<T>,
): Promise<T> {
  const namespace = uniqueNamespace('xbench');
  const full = {
    REDIS_URL: url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    LOG_LEVEL: 'warn',
    ...env,
  };
  const services = await startServices(full);
  const redis = new Redis(url);
  const client = new SandstreamClient({ redis, namespace });
  try {
    return await body(client, namespace, redis);
  } finally {
    await client.close();
    redis.disconnect();
    await Promise.all(services.map((s) => s.stop(15_000)));
  }
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'sandstream-xfer-bench-'));
  const tree = join(scratch, 'tree');
  mkdirSync(tree);
  for (let i = 0; i < MEGABYTES; i++) writeFileSync(join(tree, `f${i}.bin`), randomBytes(1024 * 1024));
  const local = (name: string) => join(scratch, name);
  const fresh = (dir: string) => () => rmSync(dir, { recursive: true, force: true });
  const own = await startRedisServer();
  const lines: string[] = [];
  try {
    if (BACKENDS.includes('inprocess')) {
      await withStack(own.url, {}, async (client, namespace, redis) => {
        const sandbox = await client.sandboxes.create({ id: `${namespace}-inproc`, image: 'none' });
        const record = JSON.parse((await redis.hget(DEFAULT_INPROCESS_REGISTRY_KEY, sandbox.id)) ?? '{}');
        const agentPid = String(record.pid);
        const redisPid = /process_id:(\d+)/.exec(await redis.info('server'))?.[1] ?? '';
        const before = await peakRssKb(sandbox, agentPid);
        const medians = await measureAll([
          {
            name: 'cp -r',
            run: () => rate(() => sh(`cp -r '${tree}' '${local('cp')}'`), fresh(local('cp'))),
          },
          {
            name: 'tar | tar',
            run: () =>
              rate(
                () =>
                  sh(`mkdir '${local('tar')}' && tar -C '${scratch}' -c tree | tar -C '${local('tar')}' -x`),
                fresh(local('tar')),
              ),
          },
          {
            name: 'upload',
            run: () =>
              rate(
                withCpu('upload', agentPid, redisPid, () => sandbox.files.upload(tree, 'up')),
                () => sandbox.exec(['rm', '-rf', 'up']),
              ),
          },
          {
            name: 'download',
            run: () =>
              rate(
                withCpu('download', agentPid, redisPid, () =>
                  sandbox.files.downloadTo('up/tree', local('back')),
                ),
                fresh(local('back')),
              ),
          },
          {
            name: 'cli in',
            run: () =>
              rate(
                () => cli(own.url, namespace, tree, `${sandbox.id}:cli`),
                () => sandbox.exec(['rm', '-rf', 'cli']),
              ),
          },
          {
            name: 'cli out',
            run: () =>
              rate(
                () => cli(own.url, namespace, `${sandbox.id}:cli/tree`, local('cli-back')),
                fresh(local('cli-back')),
              ),
          },
        ]);
        checkSame(tree, join(local('back'), 'tree'));
        checkSame(tree, join(local('cli-back'), 'tree'));
        const rss = await peakRssKb(sandbox, agentPid);
        await sandbox.close();
        const up = medians.get('upload') ?? 0;
        const down = medians.get('download') ?? 0;
        const tar = medians.get('tar | tar') ?? 0;
        const cliIn = medians.get('cli in') ?? 0;
        const cliOut = medians.get('cli out') ?? 0;
        lines.push(
          `in-process backend, a ${MEGABYTES} MB tree (1 MB files), medians of ${ROUNDS}:`,
          `  cp -r ${mbs(medians.get('cp -r') ?? 0)}, tar -c | tar -x ${mbs(tar)}`,
          `  SDK upload ${mbs(up)} (${(up / tar).toFixed(2)}x of tar | tar), download ${mbs(down)} (${(down / tar).toFixed(2)}x) (goal >= 0.5x)`,
          `  sandstream cp in ${mbs(cliIn)} (${(cliIn / tar).toFixed(2)}x), out ${mbs(cliOut)} (${(cliOut / tar).toFixed(2)}x)`,
          `  CPU ms per upload: ${cpuLine('upload')}; per download: ${cpuLine('download')}`,
          `  agent peak RSS ${mib(before)} MB before the transfers, ${mib(rss)} MB after`,
        );
      });
    }
    if (BACKENDS.includes('docker')) {
      const carrier = findCarrierImage();
      if (!carrier) throw new Error('no sandstream/agent-carrier image: npm run images');
      await withStack(
        own.url,
        {
          SANDBOX_TYPE: 'docker',
          SANDSTREAM_AGENT_CARRIER_IMAGE: carrier,
          // The shared Redis: loopback only, open `default` user (a benchmark, not a boundary).
          SANDSTREAM_DOCKER_NETWORK: 'host',
          SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        },
        async (client, namespace) => {
          const sandbox = await client.sandboxes.create({
            id: `${namespace}-docker`,
            image: process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm',
          });
          const container = execFileSync(
            'docker',
            [
              'ps',
              '-q',
              '--filter',
              `label=${SandboxLabels.jobId}=${sandbox.id}`,
              '--filter',
              'label=sandstream.dev/role=toolchain',
            ],
            { encoding: 'utf8' },
          ).trim();
          if (!container || container.includes('\n'))
            throw new Error(`no single container for ${sandbox.id}: ${container}`);
          const workspace = (await sandbox.exec(['pwd'])).stdout.trim();
          // The agent is the container's process whose command line names it.
          const pid = (
            await sandbox.exec([
              'sh',
              '-c',
              'for p in /proc/[0-9]*; do grep -q sandstream-agent $p/cmdline 2>/dev/null && basename $p && break; done',
            ])
          ).stdout.trim();
          const before = await peakRssKb(sandbox, pid);
          const inside = (dir: string) => () => sandbox.exec(['sh', '-c', `rm -rf ${dir} && mkdir ${dir}`]);
          const medians = await measureAll([
            {
              name: 'docker cp in',
              run: () =>
                rate(
                  () => sh(`tar -C '${scratch}' -c tree | docker cp - ${container}:${workspace}/cp`),
                  inside('cp'),
                ),
            },
            {
              name: 'upload',
              run: () => rate(() => sandbox.files.upload(tree, 'up'), inside('up')),
            },
            {
              name: 'docker cp out',
              run: () =>
                rate(
                  () =>
                    sh(
                      `mkdir '${local('cp-back')}' && docker cp ${container}:${workspace}/cp/tree - | tar -C '${local('cp-back')}' -x`,
                    ),
                  fresh(local('cp-back')),
                ),
            },
            {
              name: 'download',
              run: () => rate(() => sandbox.files.downloadTo('up/tree', local('back')), fresh(local('back'))),
            },
            {
              name: 'cli in',
              run: () => rate(() => cli(own.url, namespace, tree, `${sandbox.id}:cli`), inside('cli')),
            },
            {
              name: 'cli out',
              run: () =>
                rate(
                  () => cli(own.url, namespace, `${sandbox.id}:cli/tree`, local('cli-back')),
                  fresh(local('cli-back')),
                ),
            },
          ]);
          checkSame(tree, join(local('back'), 'tree'));
          checkSame(tree, join(local('cli-back'), 'tree'));
          checkSame(tree, join(local('cp-back'), 'tree'));
          const rss = await peakRssKb(sandbox, pid);
          await sandbox.close();
          const up = medians.get('upload') ?? 0;
          const down = medians.get('download') ?? 0;
          const cpIn = medians.get('docker cp in') ?? 0;
          const cpOut = medians.get('docker cp out') ?? 0;
          const cliIn = medians.get('cli in') ?? 0;
          const cliOut = medians.get('cli out') ?? 0;
          lines.push(
            `Docker backend, the same tree, medians of ${ROUNDS}:`,
            `  tar -c | docker cp - (in) ${mbs(cpIn)}, docker cp - | tar -x (out) ${mbs(cpOut)}`,
            `  SDK upload ${mbs(up)} (${(up / cpIn).toFixed(2)}x), download ${mbs(down)} (${(down / cpOut).toFixed(2)}x) (goal >= 0.5x)`,
            `  sandstream cp in ${mbs(cliIn)} (${(cliIn / cpIn).toFixed(2)}x), out ${mbs(cliOut)} (${(cliOut / cpOut).toFixed(2)}x)`,
            `  agent peak RSS ${mib(before)} MB before the transfers, ${mib(rss)} MB after`,
          );
        },
      );
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    await own.stop();
  }
  console.log(lines.join('\n'));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
