import type { ReadinessCheck } from './health-server.js';

interface TrackedLoop {
  maxSilenceMs: number;
  last: number;
}

/**
 * Tells a loop that is alive from one that has stopped making progress. Each background loop
 * (periodic task, claim loop, waker, read loop) calls its `beat` after every iteration that
 * completed; /readyz fails a loop that has not beaten for its `maxSilenceMs`. "Process alive"
 * is not enough: a loop that died on an exception, or keeps failing against a Redis that lost
 * its consumer groups, leaves the process up but the service useless.
 */
export class ProgressWatchdog {
  private readonly loops = new Map<string, TrackedLoop>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Registers a loop (counted as fresh from now) and returns the function it calls on progress. */
  track(name: string, maxSilenceMs: number): () => void {
    const loop: TrackedLoop = { maxSilenceMs, last: this.now() };
    this.loops.set(name, loop);
    return () => {
      loop.last = this.now();
    };
  }

  /** Names of the loops silent for longer than they may be. */
  stalled(): string[] {
    const now = this.now();
    return [...this.loops].filter(([, l]) => now - l.last > l.maxSilenceMs).map(([name]) => name);
  }

  /** One readiness check per loop, named `loop:<name>`, for startHealthServer's `checks`. */
  checks(): Record<string, ReadinessCheck> {
    return Object.fromEntries(
      [...this.loops].map(([name, loop]) => [
        `loop:${name}`,
        async () => this.now() - loop.last <= loop.maxSilenceMs,
      ]),
    );
  }
}
