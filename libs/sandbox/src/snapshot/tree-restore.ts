import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { EntryWriter } from './entry-writer.js';
import type { RestoredEntry } from './snapshot-entry.js';

/** What a restore did, for the reply and the logs. */
export interface RestoreCounts {
  entries: number;
  bytes: number;
  removed: number;
}

/**
 * Makes `dir` hold exactly the entries of one part (paths `<prefix>/…`): entries written as they
 * stream in (on the writer thread, EntryWriter), then everything the snapshot did not
 * name removed. `dir` itself stays.
 */
export class TreeRestore {
  private readonly seen = new Set<string>();
  private readonly writer = new EntryWriter();
  readonly counts: RestoreCounts = { entries: 0, bytes: 0, removed: 0 };

  constructor(
    private readonly dir: string,
    private readonly prefix: string,
  ) {}

  async apply(restored: RestoredEntry): Promise<void> {
    const relative = restored.entry.path.slice(this.prefix.length + 1);
    this.seen.add(relative);
    this.counts.entries++;
    this.counts.bytes += await this.writer.write(join(this.dir, relative), restored);
  }

  /** Waits for the writes, removes what the snapshot did not hold, then sets directory modes and times. */
  async finish(): Promise<RestoreCounts> {
    await this.writer.drain();
    await mkdir(this.dir, { recursive: true });
    await this.removeUnseen(this.dir, '');
    await this.writer.finish();
    return this.counts;
  }

  /** Ends the writes of a restore that stopped midway (finish ends them otherwise). */
  close(): void {
    this.writer.close();
  }

  private async removeUnseen(dir: string, relative: string): Promise<void> {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const rel = relative ? `${relative}/${entry.name}` : entry.name;
      const full = join(dir, entry.name);
      if (!this.seen.has(rel)) {
        await rm(full, { recursive: true, force: true });
        this.counts.removed++;
      } else if (entry.isDirectory()) {
        await this.removeUnseen(full, rel);
      }
    }
  }
}
