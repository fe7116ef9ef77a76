import { execFile, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { QueueNames } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import { DEFAULT_INPROCESS_REGISTRY_KEY, SandboxLabels } from '@sandstream/sandbox';
import {
  deleteNamespaceKeys,
  pollUntil,
  type RunningService,
  repoRoot,
  SERVICE_NAMES,
  type ServiceName,
  startService,
  testRedisUrl,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { type Cluster, Redis } from 'ioredis';

const execFileAsync = promisify(execFile);

export interface Stack {
  namespace: string;
  redis: Redis | Cluster;
  client: SandstreamClient;
  env: Record<string, string>;
  services: Map<ServiceName, RunningService[]>;
  /** kill -9 one process of a service, then start a fresh one in its place. */
  crashAndRestart: (name: ServiceName) => Promise<void>;
  /** SIGTERM to every service, as an orchestrator stops them; Redis and the client stay. */
  stopServices: () => Promise<void>;
  /** Starts as many of each service as ran before stopServices(), with the same environment. */
  startServices: () => Promise<void>;
  stop: () => Promise<void>;
  logs: () => string;
}

/**
 * The four services as separate processes (built dist/) under a fresh namespace, plus an SDK
 * client for it. `env` adds to every service's environment (slot limits, backend, timings).
 */
export async function startStack(
  options: {
    env?: Record<string, string>;
    scale?: Partial<Record<ServiceName, number>>;
    label?: string;
    /** Default: all four. */
    only?: readonly ServiceName[];
    /** The stack's Redis for the suite's own client (default: the shared Redis). */
    redis?: () => Redis | Cluster;
    /** Extra node flags for every service process (e.g. `--cpu-prof`). */
    nodeArgs?: string[];
    /** Extra node flags for one service's processes (e.g. `--cpu-prof` for the reaper alone). */
    nodeArgsOf?: Partial<Record<ServiceName, string[]>>;
    /** One service run from another checkout (root ending in `/`): a baseline build in the same run. */
    rootOf?: Partial<Record<ServiceName, string>>;
  } = {},
): Promise<Stack> {
  const namespace = uniqueNamespace(options.label ?? 'e2e');
  const env: Record<string, string> = {
    SANDSTREAM_NAMESPACE: namespace,
    COMPLETION_SHARDS: '4',
    SANDBOX_TYPE: 'inprocess',
    LOG_LEVEL: 'info',
    // This run's reaper touches only this run's jobs (the Redis is shared).
    REAPER_JOB_GLOB: `${namespace}-*`,
    ...options.env,
  };
  const nodeArgs = (name: ServiceName) => [
    ...(options.nodeArgs ?? []),
    ...(options.nodeArgsOf?.[name] ?? []),
  ];
  const startOptions = (name: ServiceName) => {
    const root = options.rootOf?.[name];
    return { nodeArgs: nodeArgs(name), ...(root ? { root } : {}) };
  };
  const services = new Map<ServiceName, RunningService[]>();
  const retired: RunningService[] = [];
  const startAll = async (scale: Partial<Record<ServiceName, number>>) => {
    try {
      await Promise.all(
        (options.only ?? SERVICE_NAMES).map(async (name) => {
          const list: RunningService[] = [];
          for (let i = 0; i < (scale[name] ?? 1); i++) {
            list.push(await startService(name, env, startOptions(name)));
          }
          services.set(name, list);
        }),
      );
    } catch (err) {
      for (const list of services.values()) await Promise.all(list.map((s) => s.stop(2000)));
      throw err;
    }
  };
  await startAll(options.scale ?? {});
  let stoppedScale: Partial<Record<ServiceName, number>> = {};
  const redis = options.redis?.() ?? new Redis(testRedisUrl());
  const client = new SandstreamClient({ redis, namespace });
  return {
    namespace,
    redis,
    client,
    env,
    services,
    crashAndRestart: async (name) => {
      const list = services.get(name) ?? [];
      const victim = list.shift();
      if (victim) {
        await victim.kill9();
        retired.push(victim);
      }
      list.push(await startService(name, env, startOptions(name)));
    },
    stopServices: async () => {
      stoppedScale = Object.fromEntries([...services].map(([name, list]) => [name, list.length]));
      const all = [...services.values()].flat();
      await Promise.all(all.map((s) => s.stop(15_000)));
      retired.push(...all);
      services.clear();
    },
    startServices: () => startAll(stoppedScale),
    stop: async () => {
      // Let pod-lifecycle finish tearing down this run's sandboxes first (a cancelled job's
      // destroy may still be queued), so no agent outlives the suite.
      const destroyQueue = new Queue(QueueNames.sandboxDestroy, {
        connection: redis,
        prefix: `{${namespace}}`,
      });
      await pollUntil(
        "this run's sandboxes torn down",
        async () => {
          const pending = await destroyQueue.getJobCountByTypes(
            'waiting',
            'active',
            'delayed',
            'prioritized',
          );
          const ids = [
            ...Object.keys(await redis.hgetall(DEFAULT_INPROCESS_REGISTRY_KEY).catch(() => ({}))),
            // A closed sandbox's destroy is queued a moment after close() answers: the queue can
            // look empty while the container is still there, so the containers are asked too.
            ...dockerSandboxIds(),
          ];
          // Warm pool members stay by design (the next pod-lifecycle claims them): not waited for.
          const jobs = ids.filter(
            (id) => id.startsWith(`${namespace}-`) && !id.startsWith(`${namespace}-pool-`),
          );
          return pending === 0 && jobs.length === 0;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      ).catch(() => {}); // a teardown that cannot finish must not hang the suite: stop anyway
      await destroyQueue.close();
      await Promise.all([...services.values()].flat().map((s) => s.stop(15_000)));
      // What a test left open (a fork, a tenant's sandbox, a running job's) goes as `npm start`'s
      // run goes: pod-lifecycle's one-shot teardown destroys every sandbox of this installation,
      // so no agent outlives the suite. Warm pool members included: their Redis goes too.
      // Not spawnSync: the test process's other suites keep running while it works.
      await execFileAsync(
        process.execPath,
        [join(repoRoot, 'services/pod-lifecycle/dist/teardown-main.js')],
        {
          env: {
            ...process.env,
            REDIS_URL: testRedisUrl(),
            ...env,
            SANDSTREAM_TEARDOWN_REASON: 'test stack stopped',
          },
          timeout: 60_000,
        },
      ).catch((err: { code?: unknown; stdout?: string; stderr?: string }) =>
        console.error(`test stack ${namespace}: teardown exited ${err.code}\n${err.stdout}${err.stderr}`),
      );
      await client.close();
      await deleteNamespaceKeys(redis, namespace);
      redis.disconnect();
    },
    logs: () =>
      [...retired, ...[...services.values()].flat()].map((s) => `--- ${s.name}\n${s.output()}`).join('\n'),
  };
}

/** Job ids of the sandbox containers on this machine's Docker engine (none without Docker). */
function dockerSandboxIds(): string[] {
  const listed = spawnSync(
    'docker',
    [
      'ps',
      '-a',
      '--filter',
      `label=${SandboxLabels.managedBy}=${SandboxLabels.managedByValue}`,
      '--format',
      `{{.Label "${SandboxLabels.jobId}"}}`,
    ],
    { encoding: 'utf8', timeout: 10_000 },
  );
  return listed.status === 0 ? listed.stdout.split('\n').filter(Boolean) : [];
}
