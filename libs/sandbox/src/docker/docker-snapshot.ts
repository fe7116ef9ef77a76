import { spawn } from 'node:child_process';
import type { Stats } from 'node:fs';
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, lchown, lstat, mkdir, readdir, rm, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type Dockerode from 'dockerode';
import type { FilesCapture, FilesCopied, FilesRestored } from '../backend.js';
import { EntryWriter } from '../snapshot/entry-writer.js';
import { frozenCapture } from '../snapshot/frozen-capture.js';
import { decodeSnapshot, encodeSnapshot } from '../snapshot/snapshot-codec.js';
import {
  type CapturedEntry,
  type RestoredEntry,
  SnapshotCorruptError,
  type SnapshotEntry,
} from '../snapshot/snapshot-entry.js';
import { capturePath, captureTree, entryOf } from '../snapshot/tree-capture.js';
import { copyTree, replaceTreeContents, streamPartFile } from '../snapshot/tree-copy.js';
import { TreeRestore } from '../snapshot/tree-restore.js';

/**
 * A Docker sandbox's files, as the engine lays them out on this host (overlay2): the container's
 * own layer (`root/`: every change it made anywhere outside its mounts, deletions too) and its
 * work volume (`work/`). Read and written through the host paths, with the container paused
 * (`docker pause`: the cgroup freezer under runc, runsc's own pause under gVisor): the engine must
 * be on this host and this process root. Under gVisor only when its root file system is shared
 * with the host (`--file-access=shared`); docker-files.ts picks the route.
 */
interface ContainerLayout {
  container: Dockerode.Container;
  upper: string;
  lowers: string[];
  merged: string;
  /** Host directory of the volume at the working directory. */
  work: string;
  /** Container paths (no leading /) that are mounts: their layer content is hidden, not captured. */
  mounts: Set<string>;
}

/** Kernel file systems and the engine's own: never part of what a sandbox changed. */
const SKIPPED_TOP = new Set(['dev', 'proc', 'sys']);

export async function containerLayout(
  docker: Dockerode,
  containerId: string,
  workingDirectory: string,
): Promise<ContainerLayout> {
  const container = docker.getContainer(containerId);
  const info = await container.inspect();
  const driver = info.GraphDriver as { Name: string; Data: Record<string, string> | null };
  const data = driver.Data ?? {};
  if (driver.Name !== 'overlay2' || !data.UpperDir || !data.MergedDir) {
    throw new Error(
      `snapshots of Docker sandboxes need the overlay2 storage driver (this engine uses ${driver.Name}); see docs/snapshots.md`,
    );
  }
  const mounts = (info.Mounts ?? []) as Array<{ Destination: string; Source: string }>;
  const workMount = mounts.find((m) => m.Destination === workingDirectory);
  if (!workMount)
    throw new Error(`container ${containerId.slice(0, 12)} has no volume at ${workingDirectory}`);
  return {
    container,
    upper: data.UpperDir,
    lowers: (data.LowerDir ?? '').split(':').filter(Boolean),
    merged: data.MergedDir,
    work: workMount.Source,
    mounts: new Set([...mounts.map((m) => m.Destination.replace(/^\/+/, '')), ...ENGINE_FILES]),
  };
}

/** Files the engine bind-mounts into every container. */
const ENGINE_FILES = ['etc/hosts', 'etc/hostname', 'etc/resolv.conf'];

/**
 * A mount point or a directory above one. Never removed through the merged view: the kernel
 * detaches mounts of other namespaces whose mount point is unlinked (the sandbox would lose its
 * work volume).
 */
function holdsMount(layout: ContainerLayout, relative: string): boolean {
  for (const mount of layout.mounts) if (mount === relative || mount.startsWith(`${relative}/`)) return true;
  return false;
}

async function freezeContainer(layout: ContainerLayout): Promise<() => Promise<void>> {
  const state = (await layout.container.inspect()).State;
  if (!state.Running) throw new Error(`container ${layout.container.id.slice(0, 12)} is not running`);
  if (state.Paused) return async () => {};
  await layout.container.pause();
  return async () => {
    await layout.container.unpause();
  };
}

export function captureDocker(layout: ContainerLayout): Promise<FilesCapture> {
  return frozenCapture({
    freeze: () => freezeContainer(layout),
    entries: async function* () {
      yield* layerChanges(layout, '');
      yield* captureTree(layout.work, 'work');
    },
    parts: ['root', 'work'],
  });
}

/**
 * The container layer below `relative`: what the upper directory holds (added and changed paths),
 * plus a whiteout for each name the image has there that the container no longer shows (deleted
 * files, and the whole content of a directory made opaque by `rm -r` then `mkdir`).
 */
async function* layerChanges(layout: ContainerLayout, relative: string): AsyncGenerator<CapturedEntry> {
  const upperDir = join(layout.upper, relative);
  const names = new Set(
    (await readdir(upperDir).catch(() => [] as string[])).filter((n) => relative || !SKIPPED_TOP.has(n)),
  );
  const shown = new Set(await readdir(join(layout.merged, relative)).catch(() => [] as string[]));
  const hidden = [...(await lowerNames(layout, relative))].filter(
    (n) => !shown.has(n) && !(!relative && SKIPPED_TOP.has(n)),
  );
  for (const name of [...new Set([...names, ...hidden])].sort()) {
    const path = relative ? `${relative}/${name}` : name;
    if (!shown.has(name)) {
      // Gone from the container's view: removed (a whiteout in the layer, or an opaque parent).
      if (hidden.includes(name)) {
        const stats = await lstat(join(layout.upper, path)).catch(() => undefined);
        yield { entry: whiteout(`root/${path}`, stats) };
      }
      continue;
    }
    const full = join(layout.upper, path);
    const stats = await lstat(full);
    if (stats.isCharacterDevice()) continue; // a whiteout of a name the image does not have
    yield* capturePath(full, `root/${path}`, stats);
    if (stats.isDirectory() && !layout.mounts.has(path)) yield* layerChanges(layout, path);
  }
}

function whiteout(path: string, stats: Stats | undefined): SnapshotEntry {
  return stats
    ? { ...entryOf(path, stats), type: 'whiteout', size: 0 }
    : { path, type: 'whiteout', mode: 0, uid: 0, gid: 0, mtimeMs: 0, size: 0 };
}

async function lowerNames(layout: ContainerLayout, relative: string): Promise<Set<string>> {
  const names = new Set<string>();
  for (const lower of layout.lowers) {
    for (const name of await readdir(join(lower, relative)).catch(() => [] as string[])) names.add(name);
  }
  return names;
}

/** The top-most image layer that has `relative`, and what is there. */
async function inLower(
  layout: ContainerLayout,
  relative: string,
): Promise<{ layer: string; stats: Stats } | undefined> {
  for (const layer of layout.lowers) {
    const stats = await lstat(join(layer, relative)).catch(() => undefined);
    if (stats && !stats.isCharacterDevice()) return { layer, stats };
  }
  return undefined;
}

/**
 * Makes the container's files exactly the snapshot's: every change the container has now is
 * reverted to the image (through the merged view, as `docker cp` writes), then the snapshot's
 * changes are applied on top, and the work volume is made the snapshot's `work/` part.
 */
export async function restoreDocker(
  layout: ContainerLayout,
  snapshot: AsyncIterable<Buffer>,
): Promise<FilesRestored> {
  const started = performance.now();
  const thaw = await freezeContainer(layout);
  const work = new TreeRestore(layout.work, 'work');
  const layer = new EntryWriter();
  try {
    const removed = await revertLayer(layout);
    let entries = 0;
    let bytes = 0;
    for await (const restored of decodeSnapshot(snapshot)) {
      const { path } = restored.entry;
      if (path.startsWith('work/')) {
        await work.apply(restored);
      } else {
        const written = await applyToLayer(layout, layer, restored);
        if (written !== undefined) {
          entries++;
          bytes += written;
        }
      }
    }
    await layer.finish();
    const counts = await work.finish();
    return {
      entries: entries + counts.entries,
      bytes: bytes + counts.bytes,
      removed: removed + counts.removed,
      frozenMs: Math.round(performance.now() - started),
    };
  } finally {
    work.close();
    layer.close();
    await thaw();
  }
}

/**
 * Every change the container has now reverted to the image, through the merged view; returns how
 * many. Listed whole before anything changes (reverting a directory changes what a walk would see).
 */
async function revertLayer(layout: ContainerLayout): Promise<number> {
  const changed: string[] = [];
  for await (const { entry } of layerChanges(layout, '')) changed.push(entry.path.slice('root/'.length));
  for (const relative of changed) await revertToImage(layout, relative);
  return changed.length;
}

/** One `root/` entry written into the container through the merged view: its bytes, or undefined if skipped. */
async function applyToLayer(
  layout: ContainerLayout,
  layer: EntryWriter,
  restored: RestoredEntry,
): Promise<number | undefined> {
  const { path } = restored.entry;
  if (!path.startsWith('root/'))
    throw new SnapshotCorruptError(`snapshot entry ${path} is neither under work/ nor root/`);
  const relative = path.slice('root/'.length);
  if (
    SKIPPED_TOP.has(relative.split('/')[0] ?? '') ||
    [...layout.mounts].some((m) => relative.startsWith(`${m}/`))
  )
    return undefined;
  if (holdsMount(layout, relative) && restored.entry.type !== 'dir') return undefined;
  return layer.write(join(layout.merged, relative), restored);
}

/**
 * The container's files copied under `into` for a fork on this host (tree-copy.ts): its work
 * volume as a plain tree (`work/`), its own layer as a snapshot stream of its own
 * (`root.snapshot`: a whiteout has no plain-file form), the container paused meanwhile.
 */
export async function copyDocker(layout: ContainerLayout, into: string): Promise<FilesCopied> {
  await mkdir(into, { recursive: true });
  const started = performance.now();
  const thaw = await freezeContainer(layout);
  try {
    await pipeline(
      encodeSnapshot(layerChanges(layout, '')),
      createWriteStream(join(into, streamPartFile('root'))),
    );
    await copyTree(layout.work, join(into, 'work'));
  } finally {
    await thaw();
  }
  return { parts: ['root', 'work'], frozenMs: Math.round(performance.now() - started) };
}

/** The container's files made exactly a copyDocker copy: its layer from the stream, its work volume from the tree. */
export async function restoreCopyDocker(
  layout: ContainerLayout,
  from: string,
): Promise<Pick<FilesRestored, 'removed' | 'frozenMs'>> {
  const started = performance.now();
  const thaw = await freezeContainer(layout);
  const layer = new EntryWriter();
  try {
    let removed = await revertLayer(layout);
    for await (const restored of decodeSnapshot(createReadStream(join(from, streamPartFile('root')))))
      await applyToLayer(layout, layer, restored);
    await layer.finish();
    removed += (await replaceTreeContents(layout.work, join(from, 'work'))).removed;
    return { removed, frozenMs: Math.round(performance.now() - started) };
  } finally {
    layer.close();
    await thaw();
  }
}

/** One changed path back to what the image has there (or gone, if the image has nothing). */
async function revertToImage(layout: ContainerLayout, relative: string): Promise<void> {
  const target = join(layout.merged, relative);
  const lower = await inLower(layout, relative);
  const current = await lstat(target).catch(() => undefined);
  if (holdsMount(layout, relative)) return;
  if (!lower) {
    if (current) await rm(target, { recursive: true, force: true });
    return;
  }
  if (lower.stats.isDirectory() && current?.isDirectory()) {
    // Its children are changes of their own (reverted one by one): only the directory's own fields.
    await lchown(target, lower.stats.uid, lower.stats.gid);
    await chmod(target, lower.stats.mode & 0o7777);
    await utimes(target, lower.stats.atime, lower.stats.mtime);
    return;
  }
  if (current) await rm(target, { recursive: true, force: true });
  // Bottom layer first, so the upper layers' versions of a directory's children win.
  for (const layer of [...layout.lowers].reverse()) {
    const source = join(layer, relative);
    if (!(await lstat(source).catch(() => undefined))) continue;
    await copyPreserving(source, target);
  }
}

/** `cp -a` keeps owners, modes, times, symlinks and hard links, as the image has them. */
function copyPreserving(source: string, target: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('cp', ['-a', '-T', '--no-preserve=xattr', source, target], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`cp ${source} ${target}: ${stderr.trim() || `exit ${code}`}`)),
    );
  });
}
