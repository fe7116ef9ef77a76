import { type SandboxKeys, sandboxKeyPrefix, sandboxKeys } from '@sandstream/wire';

/**
 * Every Redis key the services use, in one place.
 *
 * Cluster layout: keys that one Lua script touches together share a hash tag.
 * - Per job: `job:{<jobId>}` (the job record hash) and the wire's tagged `sandbox:{<jobId>}:*`
 *   keys live in the job's slot, so a state transition can update the record and append to the
 *   job's events stream atomically.
 * - Admission: the global and per-tenant lease sets share `{<ns>:leases}`, so one script checks
 *   and takes both slots.
 * - BullMQ: all queues use the prefix `{<ns>}` (BullMQ's own scripts need each queue's keys in one slot).
 * Cross-slot writes (indexes, `events:lifecycle`) happen after the atomic part and are
 * idempotent, so a crash between them leaves, at worst, a stale index entry that readers verify.
 *
 * `namespace` isolates everything that is not per-job (tests pass a random one); per-job keys
 * are isolated by the job id itself.
 */
export interface KeySpace {
  readonly namespace: string;
  /** BullMQ `prefix` option for every Queue / Worker / QueueEvents. */
  readonly bullPrefix: string;
  /** Capped stream of every job transition, for observers. */
  readonly lifecycleStream: string;
  /** HASH template name -> BuiltTemplate JSON: templates `sandstream template build` registered. */
  readonly builtTemplates: string;
  /** ZSET jobId -> lease expiry (ms): holders of a global sandbox slot. */
  readonly leasesGlobal: string;
  /** ZSET jobId -> lease expiry (ms): holders of one of the tenant's slots. */
  leasesTenant(tenant: string): string;
  /** LIST: one entry per freed slot; schedulers block on it instead of polling for capacity. */
  readonly capacityFreed: string;
  /** ZSET jobId -> rank: jobs waiting for capacity, best first. */
  readonly capacityWaiting: string;
  /** ZSET jobId -> createdAt (ms): jobs of one tenant. */
  jobsByTenant(tenant: string): string;
  /** ZSET jobId -> updatedAt (ms): jobs currently in a state. */
  jobsByState(state: string): string;
  /** ZSET jobId -> first seen (ms): jobs whose output the JetStream log archive still has to finish. */
  readonly logArchiveActive: string;
  /** HASH: the job record. */
  job(jobId: string): string;
  /**
   * STRING `pending` | `done`: where the JetStream log archive stands with the job's events
   * stream. In the job's slot (the reaper's delete script checks it atomically) and outside
   * `sandbox:{jobId}:*`, so the sandbox's own Redis user can neither read nor delete it.
   */
  jobLogArchive(jobId: string): string;
  /**
   * HASH: the sandbox's preview entries (preview-ports.ts): `label` (its host-form label, so the
   * label index entry can be freed with it) and `port:<n>` = `public` for each port made public.
   * In the job's slot (the reaper's delete script takes it with the record) and outside
   * `sandbox:{jobId}:*`, so the sandbox's own Redis user can neither read nor open its ports.
   */
  jobPreview(jobId: string): string;
  /**
   * HASH: the code interpreter's contexts the sandbox has had (name -> 1), kept through pauses
   * (outside the sandbox's prefix, which a pause frees) so that a kernel a new agent starts for
   * one of them says `stateLost`. Freed with the job.
   */
  jobCodeContexts(jobId: string): string;
  /** STRING: the sandbox id a host-form preview label names (`{port}-{label}.{domain}`). */
  previewLabel(label: string): string;
  /** The wire's per-job keys, always in the tagged (hash-tag) style. */
  sandbox(jobId: string): SandboxKeys;
  /** Prefix of all of a job's sandbox keys (ACL pattern, cleanup). */
  sandboxPrefix(jobId: string): string;
  /** Shared completion stream the agents of this shard notify (wire CompletionNotice). */
  completionStream(shard: number): string;
  /** Picks the completion-stream shard for a job (stable for the job's life). */
  completionShard(jobId: string, shards: number): number;
  /** Short-lived lock keys (e.g. one reaper acting on one job at a time). */
  lock(name: string): string;
  /** HASH keyId -> ApiKeyRecord JSON: the HTTP API's keys (hashed), per tenant. */
  readonly apiKeys: string;
  /** Keys of the HTTP API's own short-lived state (rate-limit counters, one-use tickets). */
  api(name: string): string;
  /**
   * STRING: this Redis's installation id for the namespace (installation.ts), generated once with
   * SET NX and read back by every service, so one deployment agrees on it and another deployment
   * with its own Redis never gets the same.
   */
  readonly installationId: string;
  /**
   * SET: ids this Redis had before it lost its data, re-announced by a service that still held
   * one (InstallationIdentity.refresh): sandboxes labelled with them are still this Redis's.
   */
  readonly installationPreviousIds: string;
  /**
   * Warm pools (warm-pool-store.ts). Every pool key shares the tag `{<ns>:pools}`, so one script
   * checks a pool's max and the global capacity and takes a member in one step.
   */
  readonly pools: PoolKeys;
  /**
   * Volumes (volume-store.ts). Every volume key shares the tag `{<ns>:volumes}`, so one script
   * checks a tenant's quota, or takes every hold a sandbox asks for, in one step.
   */
  readonly volumes: VolumeKeys;
  /** Snapshot records (snapshot-records.ts). */
  readonly snapshots: SnapshotKeys;
}

export interface VolumeKeys {
  /** HASH volume name -> VolumeRecord JSON: one tenant's volumes (its quota counts these). */
  tenant(tenant: string): string;
  /** HASH `<tenant>/<name>` -> JSON `{ <jobId>: { ro, at } }`: who mounts each volume now. */
  readonly holds: string;
  /** HASH jobId -> JSON [`<tenant>/<name>`, …]: what each sandbox holds (its release). */
  readonly heldBy: string;
  /** HASH tenant -> JSON `{ maxCount, maxBytes }`: the operator's quota (`*`: every tenant's). */
  readonly quota: string;
  /** LIST of deleted volumes' backend names, for the reaper to remove their backend objects. */
  readonly deleted: string;
}

/**
 * A tenant's snapshot keys share the tag `{<ns>:snap:<tenant>}`, so one script checks the tenant's
 * quota and records a snapshot in one step. The owner map and the expiry set cross tenants.
 */
export interface SnapshotKeys {
  /** HASH: one snapshot's record (snapshot-records.ts SnapshotRecordSchema). */
  record(tenant: string, snapshotId: string): string;
  /** ZSET snapshotId -> createdAt (ms): the tenant's complete snapshots. */
  index(tenant: string): string;
  /**
   * HASH `count`, `bytes`: what the tenant's snapshots hold against its quota (uploads count);
   * `pausedBytes` and `paused:<objectId>` -> size: its paused sandboxes' kept files (PausedFilesQuota).
   */
  usage(tenant: string): string;
  /** HASH snapshotId -> tenant: who owns an id (lookups that do not know the tenant). */
  readonly owners: string;
  /** ZSET `<tenant>/<snapshotId>` -> when the reaper deletes it (ms): retention, or an upload's grace. */
  readonly expiry: string;
  /** HASH sandboxId -> SandboxRef JSON: sandboxes a capture or restore holds frozen (SnapshotFreezeGuard). */
  readonly frozen: string;
  /** HASH `maxCount`, `maxBytes`: the quota pod-lifecycle enforces, published for a pause's up-front check. */
  readonly limits: string;
}

export interface PoolKeys {
  /** HASH memberId -> PoolMember JSON: every member not yet destroyed, claimed ones included. */
  readonly members: string;
  /** SET: unclaimed members of every pool (the global pool capacity counts these). */
  readonly unclaimed: string;
  /** SET: unclaimed members (starting or ready) of one pool (its max counts these). */
  pool(pool: string): string;
  /** ZSET memberId -> readyAt: ready, unclaimed members of one pool built from one spec version. */
  ready(pool: string, specHash: string): string;
  /** HASH jobId -> memberId: who claimed what (a job claims at most once). */
  readonly claims: string;
  /** HASH `<pool>:hit` / `<pool>:miss` -> count: warm claims since the namespace began (pool-claim-counts.ts). */
  readonly claimCounts: string;
}

export const DEFAULT_NAMESPACE = 'sandstream';

export function createKeySpace(namespace: string = DEFAULT_NAMESPACE): KeySpace {
  if (!/^[A-Za-z0-9_.-]+$/.test(namespace)) {
    throw new Error(`namespace "${namespace}" may contain only letters, digits, "_", "." and "-"`);
  }
  // The production namespace keeps the documented short names; others are prefixed.
  const scoped = (name: string) => (namespace === DEFAULT_NAMESPACE ? name : `${namespace}:${name}`);
  const leaseTag = `{${namespace}:leases}`;
  const poolTag = `{${namespace}:pools}`;
  const volumeTag = `{${namespace}:volumes}`;
  return {
    namespace,
    bullPrefix: `{${namespace}}`,
    lifecycleStream: scoped('events:lifecycle'),
    builtTemplates: `${namespace}:templates:built`,
    leasesGlobal: `${leaseTag}:global`,
    leasesTenant: (tenant) => `${leaseTag}:tenant:${tenant}`,
    capacityFreed: `${leaseTag}:freed`,
    capacityWaiting: `${leaseTag}:waiting`,
    jobsByTenant: (tenant) => `${namespace}:jobs:tenant:${tenant}`,
    jobsByState: (state) => `${namespace}:jobs:state:${state}`,
    logArchiveActive: `${namespace}:logs:active`,
    job: (jobId) => `job:{${jobId}}`,
    jobLogArchive: (jobId) => `job:{${jobId}}:log-archive`,
    jobPreview: (jobId) => `job:{${jobId}}:preview`,
    jobCodeContexts: (jobId) => `job:{${jobId}}:code-contexts`,
    previewLabel: (label) => `${namespace}:api:preview-label:${label}`,
    sandbox: (jobId) => sandboxKeys(jobId, 'tagged'),
    sandboxPrefix: (jobId) => sandboxKeyPrefix(jobId, 'tagged'),
    completionStream: (shard) => `{${namespace}:completions:${shard}}:stream`,
    completionShard: (jobId, shards) => {
      // FNV-1a: cheap, stable across processes and languages.
      let hash = 0x811c9dc5;
      for (let i = 0; i < jobId.length; i++) {
        hash ^= jobId.charCodeAt(i);
        hash = Math.imul(hash, 0x01000193) >>> 0;
      }
      return hash % Math.max(1, shards);
    },
    lock: (name) => `${namespace}:lock:${name}`,
    apiKeys: `${namespace}:apikeys`,
    api: (name) => `${namespace}:api:${name}`,
    installationId: `${namespace}:installation:id`,
    installationPreviousIds: `${namespace}:installation:previous`,
    pools: {
      members: `${poolTag}:members`,
      unclaimed: `${poolTag}:unclaimed`,
      pool: (pool) => `${poolTag}:pool:${pool}`,
      ready: (pool, specHash) => `${poolTag}:ready:${pool}:${specHash}`,
      claims: `${poolTag}:claims`,
      claimCounts: `${poolTag}:claim-counts`,
    },
    volumes: {
      tenant: (tenant) => `${volumeTag}:tenant:${tenant}`,
      holds: `${volumeTag}:holds`,
      heldBy: `${volumeTag}:held-by`,
      quota: `${volumeTag}:quota`,
      deleted: `${volumeTag}:deleted`,
    },
    snapshots: {
      record: (tenant, id) => `{${namespace}:snap:${tenant}}:${id}`,
      index: (tenant) => `{${namespace}:snap:${tenant}}:index`,
      usage: (tenant) => `{${namespace}:snap:${tenant}}:usage`,
      owners: `${namespace}:snapshots:owners`,
      expiry: `${namespace}:snapshots:expiry`,
      frozen: `${namespace}:snapshots:frozen`,
      limits: `${namespace}:snapshots:limits`,
    },
  };
}

/** The job id inside a `job:{id}` or `sandbox:{id}:…` key, or null for other keys. */
export function jobIdFromKey(key: string): string | null {
  const match = /^(?:job|sandbox):\{([^}]+)\}/.exec(key);
  return match ? (match[1] as string) : null;
}
