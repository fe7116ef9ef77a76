import { type FSWatcher, watch } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { WatchEvent } from '@sandstream/wire';

/** Directories one recursive watch follows at most (each is an inotify watch of the sandbox's). */
export const MAX_WATCHED_DIRECTORIES = 8192;

type Change = Exclude<WatchEvent, { type: 'watching' }>;

/**
 * A directory's changes, and with `recursive` those of every directory below it: one inotify
 * watch (Node's non-recursive fs.watch) per directory, a new directory watched as it appears,
 * as `inotifywait -r` does. Node's own recursive mode is not used: on Linux it does not report
 * writes to files that existed before. Events are told in order, each after the lstat that says
 * whether its name is there (created) or not (removed).
 */
export class TreeWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private telling: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly root: string,
    private readonly recursive: boolean,
    private readonly onChange: (change: Change) => void,
    /** The root could not be watched any more (it went, or the watch limit was reached). */
    private readonly onError: (message: string) => void,
  ) {}

  /** Watches the root (and, recursively, what is below it now). Throws when the root cannot be. */
  async start(): Promise<void> {
    await this.add('');
  }

  /** Resolves once every event seen so far was told. */
  async close(): Promise<void> {
    this.closed = true;
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
    await this.telling;
  }

  private async add(dir: string): Promise<void> {
    if (this.closed || this.watchers.has(dir)) return;
    if (this.watchers.size >= MAX_WATCHED_DIRECTORIES) {
      this.onError(`more than ${MAX_WATCHED_DIRECTORIES} directories to watch below ${this.root}`);
      return;
    }
    let watcher: FSWatcher;
    try {
      watcher = watch(join(this.root, dir));
    } catch (err) {
      // A directory below the root that went before it was watched: nothing of it to tell.
      if (dir === '') throw err;
      return;
    }
    this.watchers.set(dir, watcher);
    watcher.on('change', (kind, filename) => {
      if (filename !== null) this.changed(dir, kind, filename.toString());
    });
    watcher.on('error', (err) => {
      this.drop(dir);
      if (dir === '') this.onError(`watching ${this.root} failed: ${err.message}`);
    });
    if (!this.recursive) return;
    const entries = await readdir(join(this.root, dir), { withFileTypes: true }).catch(() => []);
    for (const entry of entries) if (entry.isDirectory()) await this.add(join(dir, entry.name));
  }

  /** Stops watching a directory that went, and everything below it. */
  private drop(dir: string): void {
    for (const [path, watcher] of this.watchers) {
      if (path === dir || path.startsWith(`${dir}/`)) {
        watcher.close();
        this.watchers.delete(path);
      }
    }
  }

  private changed(dir: string, kind: string, filename: string): void {
    const name = dir === '' ? filename : join(dir, filename);
    this.telling = this.telling.then(async () => {
      if (this.closed) return;
      if (kind === 'change') {
        this.onChange({ type: 'write', name });
        return;
      }
      const info = await lstat(join(this.root, name)).catch(() => null);
      this.onChange({ type: info ? 'create' : 'remove', name });
      if (!this.recursive) return;
      if (info?.isDirectory()) await this.add(name);
      else if (!info) this.drop(name);
    });
    // One event that fails to be told must not stop the ones after it (nor close()).
    this.telling = this.telling.catch(() => {});
  }
}
