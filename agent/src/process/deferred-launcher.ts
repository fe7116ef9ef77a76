import type { ProcessLauncher } from './launcher.js';

/**
 * A launcher made on demand, at most once: by `start()` (the agent calls it once its first
 * heartbeat is in Redis, so the spawner helper's fork and first PING are not part of the boot a
 * sandbox waits for) or by the first step that needs it, whichever comes first.
 * `close()` closes it only if it was ever made: an agent that stops before its first heartbeat
 * never forks the helper at all.
 */
export class DeferredLauncher {
  private made: Promise<ProcessLauncher> | null;

  /** `make` runs at most once; `ready`: a launcher made beforehand (a warm pool member's). */
  constructor(
    private readonly make: () => Promise<ProcessLauncher>,
    ready?: ProcessLauncher,
  ) {
    this.made = ready ? Promise.resolve(ready) : null;
  }

  /** The launcher, made now if nobody asked for it before. */
  start(): Promise<ProcessLauncher> {
    this.made ??= this.make();
    return this.made;
  }

  get started(): boolean {
    return this.made !== null;
  }

  async close(): Promise<void> {
    if (this.made) (await this.made).close();
  }
}
