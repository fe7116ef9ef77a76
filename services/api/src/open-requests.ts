import type { EventEmitter } from 'node:events';

/**
 * Requests each key (each address without a key) has open on this replica, long streams and
 * shells included, bounded: the rate limit counts requests as they start, so without this one
 * key could hold any number of sockets open (slow bodies, streams never read). Per replica, in
 * memory: an open request is a socket of this process, gone with it.
 */
export class OpenRequests {
  private readonly open = new Map<string, number>();

  constructor(private readonly max: number) {}

  /**
   * Counts one more request of `bucket` until `ended` (its response) emits `close`, or answers
   * false when the bucket already holds `max`.
   */
  admit(bucket: string, ended: EventEmitter): boolean {
    const count = this.open.get(bucket) ?? 0;
    if (count >= this.max) return false;
    this.open.set(bucket, count + 1);
    ended.once('close', () => {
      const left = (this.open.get(bucket) ?? 1) - 1;
      if (left <= 0) this.open.delete(bucket);
      else this.open.set(bucket, left);
    });
    return true;
  }

  /** Requests `bucket` has open now (tests, metrics). */
  count(bucket: string): number {
    return this.open.get(bucket) ?? 0;
  }
}
