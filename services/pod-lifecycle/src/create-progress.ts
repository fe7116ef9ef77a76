import type { CreateProgress } from '@sandstream/bus';

/** How often at most a phase's progress goes onto the job's timeline (its first and last always do). */
export const PROGRESS_INTERVAL_MS = 1000;

const mb = (bytes: number) => `${(bytes / 1_000_000).toFixed(1)} MB`;

/** The progress in words, as the timeline's reason: "pulling image x: 2/3 layers, 1.5 of 3.0 MB". */
export function describeProgress(p: CreateProgress): string {
  if (p.done) return `pulled image ${p.image} (${p.layers} layers, ${mb(p.totalBytes)})`;
  const bytes = p.totalBytes > 0 ? `, ${mb(p.downloadedBytes)} of ${mb(p.totalBytes)}` : '';
  return `pulling image ${p.image}: ${p.layersDone}/${p.layers} layers${bytes}`;
}

/**
 * Puts a backend's create progress on the job's timeline without flooding it: the engine reports
 * every chunk of every layer, the timeline gets the first report, then the latest one at most
 * every `intervalMs`, then the last (`done`) one. One write at a time, in order; a write that
 * fails is logged by `onError` and dropped (progress is worth less than the create it is about).
 */
export class CreateProgressReporter {
  private lastSentAt = 0;
  private pending: CreateProgress | undefined;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (progress: CreateProgress, message: string) => Promise<unknown>,
    private readonly onError: (err: unknown) => void,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {}

  /** The backend's callback (CreateSandboxRequest.onProgress). */
  readonly report = (progress: CreateProgress): void => {
    this.pending = progress;
    const due = this.lastSentAt + this.intervalMs - Date.now();
    if (progress.done || due <= 0) {
      this.send();
      return;
    }
    this.timer ??= setTimeout(() => this.send(), due);
  };

  /** Sends what is pending now and resolves when every write so far has ended. */
  async flush(): Promise<void> {
    if (this.pending) this.send();
    await this.chain;
  }

  /** Drops what is pending (the create failed or ended): nothing more goes out. */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = undefined;
  }

  private send(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const progress = this.pending;
    this.pending = undefined;
    if (!progress) return;
    this.lastSentAt = Date.now();
    this.chain = this.chain.then(() =>
      this.write(progress, describeProgress(progress)).then(
        () => undefined,
        (err: unknown) => this.onError(err),
      ),
    );
  }
}
