/**
 * Samples of one latency between two reports, for a periodic log line. Bounded: past `capacity`
 * samples it keeps every other one (a crude but memory-safe reservoir), so a burst of 100,000
 * completions cannot grow memory.
 */
export class LatencyWindow {
  private samples: number[] = [];
  private stride = 1;
  private seen = 0;

  constructor(private readonly capacity = 50_000) {}

  record(ms: number): void {
    this.seen++;
    if (this.seen % this.stride !== 0) return;
    this.samples.push(ms);
    if (this.samples.length >= this.capacity) {
      this.samples = this.samples.filter((_, i) => i % 2 === 0);
      this.stride *= 2;
    }
  }

  /** p50 / p99 / max of the samples since the last call, then starts a new window. */
  drain(): { count: number; p50: number; p99: number; max: number } | null {
    if (this.seen === 0) return null;
    const sorted = this.samples.sort((a, b) => a - b);
    const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
    const report = { count: this.seen, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? 0 };
    this.samples = [];
    this.stride = 1;
    this.seen = 0;
    return report;
  }
}
