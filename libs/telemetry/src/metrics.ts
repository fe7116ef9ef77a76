import { type Attributes, type Meter, metrics, type ObservableResult } from '@opentelemetry/api';

/*
 * Every instrument the services record, in one place so names, units and attribute keys stay
 * consistent across processes. Names follow OpenTelemetry conventions (dots, unit in `unit`,
 * durations in seconds); the Prometheus exporter spells `sandstream.step.duration` as
 * `sandstream_step_duration` (unit in `# UNIT`) and counters with `_total`. Events per second is a counter: the rate is the backend's
 * job (`rate(sandstream_step_events_total[1m])`), which is exact across replicas where a gauge
 * computed in-process would not be.
 */

/** Seconds-scale buckets: sandbox starts and steps range from milliseconds to minutes. */
const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];

export interface QueueDepthSample {
  queue: string;
  /** e.g. waiting, delayed, active */
  state: string;
  depth: number;
}

export interface TenantSlotsSample {
  tenant: string;
  inUse: number;
}

export type Observe<T> = () => Promise<readonly T[]> | readonly T[];

export interface SandstreamMetrics {
  /** Time a job spent queued before a worker took it, by queue. */
  queueWaitSeconds: { record(seconds: number, attrs: { queue: string }): void };
  /** Create-to-agent-alive latency, by backend (docker, kubernetes, process). */
  sandboxStartSeconds: { record(seconds: number, attrs: { backend: string; outcome?: string }): void };
  /** One observation per finished step. */
  stepDurationSeconds: { record(seconds: number, attrs: { kind: string; outcome: string }): void };
  /**
   * Output lines steps produced — use rate() for events per second. The dispatcher records the
   * StepResult's outputLines, stdout and stderr together (the result carries no split), so
   * `stream` is optional.
   */
  stepEvents: { add(n: number, attrs?: { stream?: string }): void };
  /** Output lines the agent dropped because Redis was slower than the process. */
  droppedLines: { add(n: number, attrs?: Attributes): void };
  /** Sandboxes this process created and has not destroyed, by backend (+1 / -1). */
  activeSandboxes: { add(delta: number, attrs: { backend: string }): void };
  reaperScans: { add(n: number, attrs: { target: string }): void };
  /** What a reaper removed: keys, containers, pods, leases, jobs. */
  reaperDeletions: { add(n: number, attrs: { target: string }): void };
  /**
   * The JetStream log archive: `entries` archived, `gaps` recorded (entries lost before they
   * could be archived), `jobs` whose log was completed.
   */
  logArchive: { add(n: number, attrs: { what: 'entries' | 'gaps' | 'jobs' }): void };
  /**
   * Registers pull-style gauges whose values live in Redis (queue lengths, slot leases): the
   * callback runs only when a reader collects, so there is no polling loop to stop on SIGTERM.
   */
  observeQueueDepth(observe: Observe<QueueDepthSample>): void;
  /** Slot leases are shared by all scheduler replicas, so one observed value beats per-process counters. */
  observeTenantSlots(observe: Observe<TenantSlotsSample>): void;
  /** Warm pool claims that got a member, by pool. */
  poolHits: { add(n: number, attrs: { pool: string }): void };
  /** Starts that went cold, by pool (`none` without one) and why (`empty`, `spec-differs`, …). */
  poolMisses: { add(n: number, attrs: { pool: string; reason: string }): void };
  /** Claim until the claimed member's agent announced itself as the job. */
  poolClaimSeconds: { record(seconds: number, attrs: { pool: string }): void };
  /** A member's place taken until its agent waits for a claim. */
  poolRefillSeconds: { record(seconds: number, attrs: { pool: string }): void };
  /** Unclaimed members per pool and state (starting, ready), read from Redis when collected. */
  observePoolMembers(observe: Observe<PoolMembersSample>): void;
}

export interface PoolMembersSample {
  pool: string;
  state: string;
  members: number;
}

/**
 * Creates the instruments on `meter`. Call after initTelemetry(): the OpenTelemetry metrics API,
 * unlike tracing, does not retro-fit instruments created before a provider was registered.
 */
export function createSandstreamMetrics(meter: Meter = metrics.getMeter('sandstream')): SandstreamMetrics {
  const seconds = (name: string, description: string) =>
    meter.createHistogram(name, {
      unit: 's',
      description,
      advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
    });

  const queueDepth = meter.createObservableGauge('sandstream.queue.depth', {
    description: 'Jobs in a queue, by queue and state',
  });
  const tenantSlots = meter.createObservableGauge('sandstream.tenant.slots_in_use', {
    description: 'Concurrency slots held per tenant',
  });

  const poolMembers = meter.createObservableGauge('sandstream.pool.members', {
    description: 'Unclaimed warm pool members, by pool and state',
  });

  const safely =
    <T>(observe: Observe<T>, emit: (result: ObservableResult, sample: T) => void) =>
    async (result: ObservableResult) => {
      // A failed Redis read must not break the whole collection (and the scrape) for every metric.
      try {
        for (const sample of await observe()) emit(result, sample);
      } catch {
        /* skip this collection */
      }
    };

  return {
    queueWaitSeconds: seconds('sandstream.queue.wait_time', 'Time a job waited in its queue'),
    sandboxStartSeconds: seconds('sandstream.sandbox.start_latency', 'Sandbox create until agent alive'),
    stepDurationSeconds: seconds('sandstream.step.duration', 'Step run time'),
    stepEvents: meter.createCounter('sandstream.step.events', { description: 'Output lines streamed' }),
    droppedLines: meter.createCounter('sandstream.step.dropped_lines', {
      description: 'Output lines dropped under back-pressure',
    }),
    activeSandboxes: meter.createUpDownCounter('sandstream.sandbox.active', {
      description: 'Sandboxes currently alive',
    }),
    reaperScans: meter.createCounter('sandstream.reaper.scans', { description: 'Reaper scan passes' }),
    reaperDeletions: meter.createCounter('sandstream.reaper.deletions', {
      description: 'Items the reaper removed',
    }),
    logArchive: meter.createCounter('sandstream.log_archive', {
      description: 'Log archive work: entries archived, gaps recorded, jobs completed',
    }),
    poolHits: meter.createCounter('sandstream.pool.hits', { description: 'Warm pool claims served' }),
    poolMisses: meter.createCounter('sandstream.pool.misses', {
      description: 'Starts that went cold, by reason',
    }),
    poolClaimSeconds: seconds('sandstream.pool.claim_latency', 'Claim until the member runs as the job'),
    poolRefillSeconds: seconds('sandstream.pool.refill_latency', 'Member reserved until ready'),
    observePoolMembers(observe) {
      poolMembers.addCallback(
        safely(observe, (r, s) => r.observe(s.members, { pool: s.pool, state: s.state })),
      );
    },
    observeQueueDepth(observe) {
      queueDepth.addCallback(
        safely(observe, (r, s) => r.observe(s.depth, { queue: s.queue, state: s.state })),
      );
    },
    observeTenantSlots(observe) {
      tenantSlots.addCallback(safely(observe, (r, s) => r.observe(s.inUse, { tenant: s.tenant })));
    },
  };
}
