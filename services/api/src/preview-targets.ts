import {
  isPublicPort,
  type KeySpace,
  type RedisClient,
  type SandboxRecord,
  sandboxRecordOf,
} from '@sandstream/bus';
import type { SandstreamClient } from '@sandstream/client';

/**
 * A second's memory of what the preview proxy reads per request: the sandbox's record (tenant,
 * state, address) and whether a port is public. A page loads many assets; reading the whole job
 * record from Redis for each cost more than the proxying itself (docs/benchmarks.md). A sandbox
 * that closes is seen within the second, and its open connections are closed by
 * PreviewConnections on the same schedule.
 */
const TTL_MS = 1000;
const MAX_ENTRIES = 10_000;

export class PreviewTargets {
  private readonly records = new Map<string, { value: Promise<SandboxRecord | null>; until: number }>();
  private readonly publicPorts = new Map<string, { value: Promise<boolean>; until: number }>();

  constructor(private readonly ctx: { client: SandstreamClient; redis: RedisClient; keys: KeySpace }) {}

  record(id: string): Promise<SandboxRecord | null> {
    return this.remember(this.records, id, async () => {
      const job = await this.ctx.client.get(id);
      return job ? sandboxRecordOf(job) : null;
    });
  }

  /** Only `true` is remembered: a port made public opens at once, and is never made private again. */
  isPublic(id: string, port: number): Promise<boolean> {
    const key = `${port}:${id}`;
    const value = this.remember(this.publicPorts, key, () =>
      isPublicPort(this.ctx.redis, this.ctx.keys, id, port),
    );
    void value.then((open) => {
      if (!open) this.publicPorts.delete(key);
    });
    return value;
  }

  private remember<T>(
    map: Map<string, { value: Promise<T>; until: number }>,
    key: string,
    read: () => Promise<T>,
  ) {
    const now = Date.now();
    const hit = map.get(key);
    if (hit && hit.until > now) return hit.value;
    if (map.size >= MAX_ENTRIES) map.clear();
    const value = read();
    map.set(key, { value, until: now + TTL_MS });
    // A failed read is not remembered.
    value.catch(() => map.delete(key));
    return value;
  }
}
