import { nextEntryId } from '@sandstream/bus';

/**
 * The archived batches still inside the "keep" window: trimming to the first of them leaves at
 * least `keep` archived entries (and everything not archived) in Redis.
 */
export class TrimWindow {
  private readonly batches: { first: string; count: number }[] = [];
  private total = 0;
  private trimmedTo: string | undefined;

  constructor(private readonly keep: number) {}

  add(first: string, count: number): void {
    this.batches.push({ first, count });
    this.total += count;
    while (
      this.batches.length > 0 &&
      this.total - (this.batches[0] as { count: number }).count >= this.keep
    ) {
      this.total -= (this.batches.shift() as { count: number }).count;
    }
  }

  /** The MINID to trim to now, or undefined when nothing new may go. */
  minId(cursor: string): string | undefined {
    const id =
      this.keep === 0 ? nextEntryId(cursor) : this.total >= this.keep ? this.batches[0]?.first : undefined;
    if (id === undefined || id === this.trimmedTo) return undefined;
    this.trimmedTo = id;
    return id;
  }
}
