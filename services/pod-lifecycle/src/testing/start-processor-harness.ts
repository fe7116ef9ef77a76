import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AgentAnnouncements,
  bullJobId,
  createKeySpace,
  DispatchKeys,
  JobStore,
  type KeySpace,
  LeaseRenewal,
  parseJobSpec,
  QueueNames,
  SlotAdmission,
} from '@sandstream/bus';
import { InProcessBackend, type InProcessBackendOptions } from '@sandstream/sandbox';
import { type Logger, silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { createStartProcessor, type StartDeps } from '../start-sandbox.js';

export interface StartProcessorHarnessOptions<B extends InProcessBackend> {
  /** The suite's short name: its namespace is `t-<name>-<random>`, its sandboxes' root `sandstream-<name>-…`. */
  name: string;
  /** The installation the processor labels its sandboxes with. */
  installation: string;
  /** The suite's own backend (one that records what it is asked); a plain InProcessBackend when absent. */
  backend?: (options: InProcessBackendOptions) => B;
  /**
   * What the suite's processor has beyond the shared set-up (a Redis ACL, kept files). Called in
   * beforeAll, so it may name what the test file declares after this call.
   */
  deps?: (harness: StartProcessorHarness<B>) => Partial<StartDeps>;
  /** How many creates the start worker runs at once; one when absent. */
  concurrency?: number;
  /** What else a job leaves behind once the suite is done, beside its sandbox and record (its Redis user). */
  forgetJob?: (jobId: string) => Promise<unknown>;
}

export interface StartProcessorHarness<B extends InProcessBackend> {
  url: string;
  /** Random per run, so that suites sharing the one Redis never meet. */
  suffix: string;
  ns: string;
  keys: KeySpace;
  prefix: string;
  logger: Logger;
  redis: Redis;
  /** Parent of the sandboxes' state directories. */
  root: string;
  backend: B;
  store: JobStore;
  leases: LeaseRenewal;
  dispatchKeys: DispatchKeys;
  /** The scheduler's side, played by the suite: a scheduled job holds a slot. */
  admission: SlotAdmission;
  announcements: AgentAnnouncements;
  createQueue: Queue;
  dispatchQueue: Queue;
  destroyQueue: Queue;
  /** What the worker's processor was made with (from beforeAll on): for a second one alike but for one dep. */
  readonly startDeps: StartDeps;
  /** A job as the scheduler hands it to pod-lifecycle: created, holding a slot, `scheduled`. */
  scheduledJob(name: string): Promise<string>;
  /**
   * Queues the job's `sandbox-create` (one attempt) and waits for the start processor's outcome;
   * its sandbox the local image with a 30 s start deadline unless given.
   */
  runCreate(jobId: string, sandbox?: Record<string, unknown>): Promise<unknown>;
}

/**
 * The set-up the start processor's suites share, against the real Redis and the in-process
 * backend: the sandbox-create, dispatch and destroy queues, a worker running the processor on
 * sandbox-create, and, after the suite, everything closed and every job's sandbox, record and
 * keys gone. Call at the top level of a test file: it registers its own beforeAll and afterAll.
 */
export function useStartProcessor<B extends InProcessBackend = InProcessBackend>(
  options: StartProcessorHarnessOptions<B>,
): StartProcessorHarness<B> {
  const url = testRedisUrl();
  const suffix = Math.random().toString(36).slice(2, 10);
  const ns = `t-${options.name}-${suffix}`;
  const keys = createKeySpace(ns);
  const prefix = keys.bullPrefix;
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  // The worker blocks on its own connection; the announcements' subscriber can only subscribe.
  const workerRedis = new Redis(url, { maxRetriesPerRequest: null });
  const subscriber = new Redis(url, { maxRetriesPerRequest: null });
  const root = mkdtempSync(join(tmpdir(), `sandstream-${options.name}-`));
  const backendOptions = { redis, root, registryKey: `${ns}:inprocess`, idleTimeoutSeconds: 60 };
  const backend = options.backend
    ? options.backend(backendOptions)
    : (new InProcessBackend(backendOptions) as B);
  const store = new JobStore({ redis, keys });
  const createQueue = new Queue(QueueNames.sandboxCreate, { connection: redis, prefix });
  const jobIds: string[] = [];
  let startDeps: StartDeps | undefined;
  let startWorker: Worker;
  let queueEvents: QueueEvents;

  const harness: StartProcessorHarness<B> = {
    url,
    suffix,
    ns,
    keys,
    prefix,
    logger: silentLogger(options.installation),
    redis,
    root,
    backend,
    store,
    leases: new LeaseRenewal({ redis, keys, leaseMs: 60_000 }),
    dispatchKeys: new DispatchKeys(keys, 2),
    admission: new SlotAdmission({ redis, keys, globalLimit: 10, tenantLimit: 10, leaseMs: 60_000 }),
    announcements: new AgentAnnouncements(subscriber),
    createQueue,
    dispatchQueue: new Queue(QueueNames.dispatch, { connection: redis, prefix }),
    destroyQueue: new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix }),
    get startDeps(): StartDeps {
      if (!startDeps) throw new Error('the start processor is made in beforeAll: ask for its deps in a test');
      return startDeps;
    },
    async scheduledJob(name) {
      const id = `${ns}-${name}`;
      jobIds.push(id);
      await store.create(parseJobSpec({ id, tenant: 'acme', image: 'local', steps: [{ command: 'true' }] }));
      await harness.admission.acquire(id, 'acme');
      await store.transition(id, ['queued'], 'scheduled');
      return id;
    },
    async runCreate(jobId, sandbox = { image: 'local', startDeadlineSeconds: 30 }) {
      const job = await createQueue.add(
        'create',
        { jobId, tenant: 'acme', sandbox },
        { jobId: bullJobId(jobId), attempts: 1 },
      );
      return job.waitUntilFinished(queueEvents, 30_000);
    },
  };

  beforeAll(async () => {
    // Subscribed before any start runs: a ready announcement is not kept for a late listener.
    await harness.announcements.start();
    startDeps = {
      store,
      leases: harness.leases,
      redis,
      keys,
      dispatchKeys: harness.dispatchKeys,
      backend,
      announcements: harness.announcements,
      acl: null,
      agentRedisUrl: url,
      dispatchQueue: harness.dispatchQueue,
      destroyQueue: harness.destroyQueue,
      logger: harness.logger,
      installation: options.installation,
      ...options.deps?.(harness),
    };
    const start = createStartProcessor(startDeps);
    startWorker = new Worker(QueueNames.sandboxCreate, (job) => start(job), {
      connection: workerRedis,
      prefix,
      concurrency: options.concurrency ?? 1,
    });
    queueEvents = new QueueEvents(QueueNames.sandboxCreate, {
      connection: new Redis(url, { maxRetriesPerRequest: null }),
      prefix,
    });
    await queueEvents.waitUntilReady();
  });

  afterAll(async () => {
    await startWorker.close();
    await queueEvents.close();
    await harness.announcements.close();
    subscriber.disconnect();
    for (const q of [createQueue, harness.dispatchQueue, harness.destroyQueue]) {
      await q.obliterate({ force: true });
      await q.close();
    }
    for (const id of jobIds) {
      await backend
        .destroy({ jobId: id, backend: 'inprocess', id: '0' }, { graceMs: 0 })
        .catch(() => undefined);
      await options.forgetJob?.(id);
      await store.delete(id);
    }
    await deleteNamespaceKeys(redis, ns);
    await backend.close();
    redis.disconnect();
    workerRedis.disconnect();
    rmSync(root, { recursive: true, force: true });
  });

  return harness;
}
