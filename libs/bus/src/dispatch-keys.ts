import { z } from 'zod';
import type { KeySpace } from './key-space.js';

/**
 * Keys of the step-dispatcher that other packages must spell the same way: pod-lifecycle picks
 * the completion shard it passes to the agent as notifyStream, and the reaper checks whether the
 * dispatcher holds a job. Only the dispatcher reads or writes what is behind them (producers
 * cancel through libs/bus cancel-request.ts). Built on KeySpace so namespaces isolate them like
 * everything else.
 *
 * Per completion shard (one hash tag per shard, so shards spread over a cluster):
 * - the completion stream (KeySpace.completionStream)
 * - `…:deadlines` ZSET of step / job / cancel deadlines (score = epoch ms), swept by one timer
 * - `…:running` ZSET of jobs whose steps run (score = dispatch time), for heartbeat checks
 * Per job (in the job's slot, beside `job:{id}` and `sandbox:{id}:*`):
 * - `dispatch:{id}` HASH: cursor, running step, rendered steps, cancel flag, outcome
 */
export const DEFAULT_COMPLETION_SHARDS = 8;

export const CompletionShardsSchema = z.coerce
  .number()
  .int('COMPLETION_SHARDS must be an integer')
  .min(1, 'COMPLETION_SHARDS is at least 1')
  .max(1024, 'COMPLETION_SHARDS is at most 1024');

/** Consumer group every dispatcher instance joins on every completion shard. */
export const COMPLETION_GROUP = 'step-dispatcher';

export class DispatchKeys {
  readonly shards: number;

  constructor(
    readonly keySpace: KeySpace,
    shards: number = DEFAULT_COMPLETION_SHARDS,
  ) {
    this.shards = CompletionShardsSchema.parse(shards);
  }

  get namespace(): string {
    return this.keySpace.namespace;
  }

  shardOf(jobId: string): number {
    return this.keySpace.completionShard(jobId, this.shards);
  }

  completionStream(shard: number): string {
    return this.keySpace.completionStream(shard);
  }

  /** The notifyStream for a job's agent. */
  completionStreamFor(jobId: string): string {
    return this.completionStream(this.shardOf(jobId));
  }

  deadlines(shard: number): string {
    return `${this.shardTag(shard)}:deadlines`;
  }

  running(shard: number): string {
    return `${this.shardTag(shard)}:running`;
  }

  dispatchState(jobId: string): string {
    return `dispatch:{${jobId}}`;
  }

  /** The job id of a `dispatchState` key, or null for any other key. */
  jobIdOfDispatchState(key: string): string | null {
    const [before, after] = this.dispatchState('\u0000').split('\u0000') as [string, string];
    if (!key.startsWith(before) || !key.endsWith(after) || key.length <= before.length + after.length)
      return null;
    return key.slice(before.length, key.length - after.length);
  }

  /** Lock keys of the dispatcher's periodic checks (one instance per round). */
  lock(name: string): string {
    return this.keySpace.lock(`dispatch:${name}`);
  }

  /** ZSET of live dispatcher instances (DispatcherPresence), scored by their last stamp. */
  dispatchersAlive(): string {
    return `${this.namespace}:dispatchers:alive`;
  }

  allShards(): number[] {
    return Array.from({ length: this.shards }, (_, i) => i);
  }

  /** The shard's hash tag, the same one its completion stream carries. */
  private shardTag(shard: number): string {
    const stream = this.completionStream(shard);
    const tag = /\{[^}]+\}/.exec(stream)?.[0];
    return tag ?? `{${this.namespace}:completions:${shard}}`;
  }
}

/**
 * A member of a shard's deadlines set:
 * - `s|<jobId>|<stepId>` the step's result is overdue (its timeout plus grace: agent stuck or gone)
 * - `j|<jobId>` the job's own timeout
 * - `c|<jobId>` a cancel was requested and the agent has not confirmed it in time
 * - `i|<jobId>` a live sandbox may have gone idle (checked, and moved out while it is not)
 * `|` cannot occur in job ids (wire JobIdSchema), so members split unambiguously.
 */
export type Deadline =
  | { kind: 'step'; jobId: string; stepId: string }
  | { kind: 'job'; jobId: string }
  | { kind: 'cancel'; jobId: string }
  | { kind: 'idle'; jobId: string };

export function deadlineMember(deadline: Deadline): string {
  switch (deadline.kind) {
    case 'step':
      return `s|${deadline.jobId}|${deadline.stepId}`;
    case 'job':
      return `j|${deadline.jobId}`;
    case 'cancel':
      return `c|${deadline.jobId}`;
    case 'idle':
      return `i|${deadline.jobId}`;
  }
}

export function parseDeadlineMember(member: string): Deadline | null {
  const [kind, jobId, ...rest] = member.split('|');
  if (!jobId) return null;
  if (kind === 's' && rest.length > 0) return { kind: 'step', jobId, stepId: rest.join('|') };
  if (kind === 'j') return { kind: 'job', jobId };
  if (kind === 'c') return { kind: 'cancel', jobId };
  if (kind === 'i') return { kind: 'idle', jobId };
  return null;
}
