import { type KeyStyle, sandboxKeys } from '@sandstream/wire';
import type { Redis } from 'ioredis';

/**
 * Hears agents' ready announcements in tests, as pod-lifecycle does (libs/bus
 * AgentAnnouncements, which this library cannot import): one SUBSCRIBE per job, before its
 * sandbox is created.
 */
export class ReadyListener {
  private readonly heard = new Set<string>();
  private readonly wakers = new Map<string, () => void>();

  /** `subscriber` is a connection of its own: subscriber mode allows nothing else on it. */
  constructor(
    private readonly subscriber: Redis,
    private readonly keyStyle: KeyStyle,
  ) {
    subscriber.on('message', (channel: string) => {
      this.heard.add(channel);
      this.wakers.get(channel)?.();
    });
  }

  /** Subscribes to the job's channel; returns the `agentAnnounced` of WaitReadyOptions. */
  async listen(jobId: string): Promise<(timeoutMs: number) => Promise<boolean>> {
    const channel = sandboxKeys(jobId, this.keyStyle).ready;
    await this.subscriber.subscribe(channel);
    return (timeoutMs) =>
      this.heard.has(channel)
        ? Promise.resolve(true)
        : new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => {
              this.wakers.delete(channel);
              resolve(this.heard.has(channel));
            }, timeoutMs);
            this.wakers.set(channel, () => {
              clearTimeout(timer);
              this.wakers.delete(channel);
              resolve(true);
            });
          });
  }

  /** True once the job's agent announced itself. */
  announced(jobId: string): boolean {
    return this.heard.has(sandboxKeys(jobId, this.keyStyle).ready);
  }
}
