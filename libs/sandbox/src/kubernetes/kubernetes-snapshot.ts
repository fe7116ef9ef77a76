import type { Readable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import { extract, type Header, pack } from 'tar-stream';
import type { FilesCapture, FilesRestored } from '../backend.js';
import { frozenCapture } from '../snapshot/frozen-capture.js';
import { decodeSnapshot } from '../snapshot/snapshot-codec.js';
import { type CapturedEntry, SnapshotCorruptError, type SnapshotEntry } from '../snapshot/snapshot-entry.js';
import { execInPod } from './pod-exec.js';

/** The part a pod's capture holds: its work volume (the sandbox's working directory). */
const WORK = 'work';

export interface PodTarget {
  kubeConfig: KubeConfig;
  namespace: string;
  pod: string;
  container: string;
  /** The work volume's mount point in the container. */
  workdir: string;
}

/**
 * GNU tar would write a second name of a hard link as a link entry, which a snapshot has no type
 * for: it is asked to write the content again (hard links become copies, as on Docker). BusyBox
 * tar has no such option and is run plain.
 */
const CAPTURE_SCRIPT = `cd "$1" || exit 1
if tar --version 2>/dev/null | grep -q GNU; then exec tar --hard-dereference --numeric-owner -cf - .; fi
exec tar -cf - .`;

/**
 * Clears the work directory (its own mode and owner are the snapshot's, through the archive's
 * "." entry), then extracts the archive on stdin keeping modes and numeric owners. Prints how many
 * top-level paths it cleared.
 */
const RESTORE_SCRIPT = `cd "$1" || exit 1
n=0
for f in ./* ./.[!.]* ./..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then rm -rf -- "$f" || exit 1; n=$((n+1)); fi
done
echo "$n"
if tar --version 2>/dev/null | grep -q GNU; then exec tar --numeric-owner -xpf -; fi
exec tar -xpf -`;

/** The work volume as a snapshot stream, read from `tar` run in the pod. */
export function capturePod(
  target: PodTarget,
  freeze: () => Promise<() => Promise<void>>,
): Promise<FilesCapture> {
  return frozenCapture({
    freeze,
    entries: () => tarEntries(target),
    parts: [WORK],
  });
}

async function* tarEntries(target: PodTarget): AsyncGenerator<CapturedEntry> {
  const run = await execInPod({
    ...target,
    command: ['sh', '-c', CAPTURE_SCRIPT, 'sandstream-capture', target.workdir],
  });
  const archive = extract();
  run.stdout.on('error', (err) => archive.destroy(err));
  run.stdout.pipe(archive);
  for await (const file of archive) {
    const entry = snapshotEntryOf(file.header);
    if (!entry) {
      file.resume();
      continue;
    }
    if (entry.type === 'file') yield { entry, content: () => file as AsyncIterable<Buffer> };
    else {
      file.resume();
      yield { entry };
    }
  }
  await run.done;
}

/** A tar header as a snapshot entry under work/, or undefined for the root and what a snapshot does not hold. */
function snapshotEntryOf(header: Header): SnapshotEntry | undefined {
  const name = header.name.replace(/^\.\/?/, '').replace(/\/+$/, '');
  if (!name) return undefined;
  const type =
    header.type === 'file' || header.type === 'contiguous-file'
      ? 'file'
      : header.type === 'directory'
        ? 'dir'
        : header.type === 'symlink'
          ? 'symlink'
          : undefined;
  // Devices, fifos (and sockets, which tar skips itself) are not captured, as on the other backends.
  if (!type) return undefined;
  return {
    path: `${WORK}/${name}`,
    type,
    mode: (header.mode ?? 0) & 0o7777,
    uid: header.uid ?? 0,
    gid: header.gid ?? 0,
    mtimeMs: header.mtime ? header.mtime.getTime() : 0,
    size: type === 'file' ? (header.size ?? 0) : 0,
    ...(type === 'symlink' ? { target: header.linkname ?? '' } : {}),
  };
}

/** Makes the pod's work volume exactly the snapshot's `work/` part, streamed as a tar into the pod. */
export async function restorePod(
  target: PodTarget,
  snapshot: AsyncIterable<Buffer>,
  freeze: () => Promise<() => Promise<void>>,
): Promise<FilesRestored> {
  const started = performance.now();
  const archive = pack();
  const closed = new Promise<never>((_, reject) =>
    archive.once('close', () => reject(new Error('the archive into the pod was closed'))),
  );
  closed.catch(() => {});
  const counts = { entries: 0, bytes: 0 };
  // Started once the exec reads the archive: a snapshot refused before its first entry (a member
  // cut short is seen at once) destroys the archive, and a reader that comes to an already
  // destroyed tar-stream pack waits for an end that never comes.
  const feed = async () => {
    try {
      for await (const restored of decodeSnapshot(snapshot)) {
        const { entry } = restored;
        if (!entry.path.startsWith(`${WORK}/`)) {
          throw new SnapshotCorruptError(
            `snapshot entry ${entry.path} is outside the work tree: it was taken on a backend that captures more (Docker's container layer); a Kubernetes sandbox restores only work/`,
          );
        }
        counts.entries++;
        await addToArchive(archive, closed, entry, restored.content);
        counts.bytes += entry.type === 'file' ? entry.size : 0;
      }
      archive.finalize();
    } catch (err) {
      archive.destroy(err as Error);
      throw err;
    }
  };
  const thaw = await freeze();
  try {
    const run = await execInPod({
      ...target,
      command: ['sh', '-c', RESTORE_SCRIPT, 'sandstream-restore', target.workdir],
      stdin: archive as AsyncIterable<Buffer>,
    });
    const feeding = feed();
    feeding.catch(() => {});
    let printed = '';
    let execError: unknown;
    try {
      printed = await readAll(run.stdout);
      await run.done;
    } catch (err) {
      execError = err;
      archive.destroy();
    }
    try {
      await feeding;
    } catch (err) {
      // The snapshot's own error (corrupt, foreign) is the one to report, not tar's reaction to it.
      if (err instanceof SnapshotCorruptError || execError === undefined) throw err;
    }
    if (execError !== undefined) throw execError;
    return {
      ...counts,
      removed: Number.parseInt(printed.trim(), 10) || 0,
      frozenMs: Math.round(performance.now() - started),
    };
  } finally {
    archive.destroy();
    await thaw();
  }
}

async function addToArchive(
  archive: ReturnType<typeof pack>,
  closed: Promise<never>,
  entry: SnapshotEntry,
  content: AsyncIterable<Buffer>,
): Promise<void> {
  const header: Partial<Header> & { name: string } = {
    name: entry.path.slice(WORK.length + 1),
    mode: entry.mode,
    uid: entry.uid,
    gid: entry.gid,
    mtime: new Date(entry.mtimeMs),
    type: entry.type === 'dir' ? 'directory' : entry.type === 'symlink' ? 'symlink' : 'file',
    size: entry.type === 'file' ? entry.size : 0,
    ...(entry.type === 'symlink' ? { linkname: entry.target ?? '' } : {}),
  };
  if (entry.type === 'whiteout') {
    throw new SnapshotCorruptError(
      `snapshot entry ${entry.path} is a whiteout, which a work tree never holds`,
    );
  }
  if (entry.type !== 'file') {
    for await (const _ of content) {
      // Nothing to keep: only a file has content.
    }
    await Promise.race([
      new Promise<void>((resolve, reject) => archive.entry(header, (err) => (err ? reject(err) : resolve()))),
      closed,
    ]);
    return;
  }
  const sink = archive.entry(header);
  const written = new Promise<void>((resolve, reject) => {
    sink.once('finish', () => resolve());
    sink.once('error', (err: Error) => reject(err));
  });
  for await (const chunk of content) {
    if (!sink.write(chunk))
      await Promise.race([new Promise<void>((resolve) => sink.once('drain', () => resolve())), closed]);
  }
  // streamx's end() takes an optional last chunk its types call required.
  sink.end(undefined);
  await Promise.race([written, closed]);
}

async function readAll(stream: Readable): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += (chunk as Buffer).toString('utf8');
  return text;
}
