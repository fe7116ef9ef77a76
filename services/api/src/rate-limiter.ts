import { busLua, type KeySpace, luaDir, type RedisClient } from '@sandstream/bus';
import { HttpProblem } from './problem.js';

const WINDOW_MS = 60_000;
/** Below this share of the limit a request does not wait for Redis' count. */
const WAIT_ABOVE = 0.8;
/** Buckets remembered per replica (the oldest are forgotten past this). */
const MAX_BUCKETS = 50_000;

const RATE_LIMIT = busLua.extend(luaDir(import.meta.url)).load('api-rate-limit');

interface Bucket {
  /** Redis' count for the window, as of the last reply. */
  known: number;
  /** Requests counted here whose reply has not come back yet. */
  inflight: number;
  /** When the window of `known` ends (epoch ms). */
  until: number;
  /** The requests of this turn of the event loop, counted in Redis by one call at its end. */
  batch?: Batch | undefined;
}

interface Batch {
  size: number;
  /** Redis' count after the whole batch, and the window's ms left. */
  reply: Promise<[number, number]>;
}

/**
 * Requests per minute per key (per address without one), counted in Redis so every replica
 * shares the count: a fixed one-minute window per bucket, one script call per bucket for the
 * requests of one turn of the event loop (`lua/api-rate-limit-1.lua`; under load a busy key's
 * requests arrive together, and one call instead of one each spares Redis and this process).
 * Each request of a batch gets its own place in the count, so the limit stays exact. Far from the limit a request does not wait for that call (the
 * count is sent, its reply updates this replica's view): the limit costs no round trip on the
 * common path. From 80 % of the limit on, each request waits for Redis' count, so the limit
 * itself is exact; what replicas can over-admit is bounded by the requests in flight between
 * them while below 80 %.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly ctx: { redis: RedisClient; keys: KeySpace },
    private readonly perMinute: number,
  ) {}

  async take(name: string): Promise<void> {
    const now = Date.now();
    let bucket = this.buckets.get(name);
    if (!bucket || bucket.until <= now) {
      if (this.buckets.size >= MAX_BUCKETS) this.buckets.clear();
      bucket = { known: 0, inflight: 0, until: now + WINDOW_MS };
      this.buckets.set(name, bucket);
    }
    const counted = this.count(name, bucket);
    if (bucket.known + bucket.inflight <= this.perMinute * WAIT_ABOVE) {
      // Not waited for; a failure here only means this replica's view is not updated.
      counted.catch(() => {});
      return;
    }
    const [count, ttl] = await counted;
    if (count <= this.perMinute) return;
    throw new HttpProblem(
      429,
      'rate-limited',
      `at most ${this.perMinute} requests per minute for this key; retry in ${Math.max(1, Math.ceil(ttl / 1000))} s`,
    );
  }

  /** This request's place in the window's count (and the ms left), once Redis counted its batch. */
  private async count(name: string, bucket: Bucket): Promise<[number, number]> {
    bucket.inflight++;
    try {
      const batch = bucket.batch ?? this.openBatch(name, bucket);
      const place = batch.size++;
      const [total, left] = await batch.reply;
      return [total - batch.size + 1 + place, left];
    } finally {
      bucket.inflight--;
    }
  }

  private openBatch(name: string, bucket: Bucket): Batch {
    const batch: Batch = {
      size: 0,
      // Sent after this turn's other requests joined it (setImmediate runs after the turn's I/O).
      reply: new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
        bucket.batch = undefined;
        const key = this.ctx.keys.api(`rate:{${name}}`);
        const reply = await RATE_LIMIT.run<[number, number]>(this.ctx.redis, [key], [WINDOW_MS, batch.size]);
        bucket.known = Math.max(bucket.known, reply[0]);
        bucket.until = Date.now() + reply[1];
        return reply;
      }),
    };
    bucket.batch = batch;
    return batch;
  }
}
