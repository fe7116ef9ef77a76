import type { Readable } from 'node:stream';
import { extract, type Header, pack } from 'tar-stream';
import type { FilesCapture, FilesRestored } from '../backend.js';
import { frozenCapture } from './frozen-capture.js';
import { decodeSnapshot } from './snapshot-codec.js';
import {
  type CapturedEntry,
  type RestoredEntry,
  SnapshotCorruptError,
  type SnapshotEntry,
} from './snapshot-entry.js';

/**
 * A sandbox's work volume captured and restored by `tar` run inside the sandbox, for backends
 * whose files the host cannot read or write directly: a Kubernetes pod (through `pods/exec`) and a
 * Docker container under gVisor (through `docker exec`: its Sentry keeps its own view of the file
 * system, docs/snapshots.md). The backend supplies how to run a command there; the archive, the
 * scripts and the snapshot form are the same for both.
 */

/** The part such a capture holds: the work volume (the sandbox's working directory). */
const WORK = 'work';

/** A command running in the sandbox. */
export interface SandboxExecRun {
  /** Its standard output; read it, or the command is held back. */
  stdout: Readable;
  /** Resolves when it exited 0; rejects naming its exit status and stderr otherwise. */
  done: Promise<void>;
}

/** Runs `command` in the sandbox's toolchain container as its user, `stdin` streamed to it when given. */
export type SandboxExec = (command: string[], stdin?: AsyncIterable<Buffer>) => Promise<SandboxExecRun>;

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

/** The work volume at `workdir` as a snapshot stream, read from `tar` run in the sandbox, frozen meanwhile. */
export function captureWorkByTar(
  exec: SandboxExec,
  workdir: string,
  freeze: () => Promise<() => Promise<void>>,
): Promise<FilesCapture> {
  return frozenCapture({
    freeze,
    entries: () => tarEntries(exec, workdir),
    parts: [WORK],
  });
}

async function* tarEntries(exec: SandboxExec, workdir: string): AsyncGenerator<CapturedEntry> {
  const run = await exec(['sh', '-c', CAPTURE_SCRIPT, 'sandstream-capture', workdir]);
  const archive = extract();
  run.stdout.on('error', (err) => archive.destroy(err));
  run.stdout.pipe(archive);
  let whole = false;
  try {
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
    whole = true;
  } finally {
    // A reader that gave up (a failed upload): the exec's output is dropped, which ends its
    // connection, so tar does not stay blocked on a full pipe in the sandbox.
    if (!whole) run.stdout.destroy();
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

/**
 * Makes the work volume at `workdir` exactly the snapshot's `work/` part, streamed as a tar into
 * the sandbox, frozen meanwhile. `sandboxKind` names the sandbox in the refusal of a snapshot that
 * holds more than a work tree ("a Kubernetes sandbox").
 */
export async function restoreWorkByTar(
  exec: SandboxExec,
  workdir: string,
  snapshot: AsyncIterable<Buffer>,
  freeze: () => Promise<() => Promise<void>>,
  sandboxKind: string,
): Promise<FilesRestored> {
  const started = performance.now();
  const outside = (entry: SnapshotEntry) =>
    new SnapshotCorruptError(
      `snapshot entry ${entry.path} is outside the work tree: it was taken on a backend that captures more (Docker's container layer: runc, or gVisor with --file-access=shared); ${sandboxKind} restores only work/`,
    );
  const entries = decodeSnapshot(snapshot)[Symbol.asyncIterator]();
  // Read before anything changes: the restore script clears the work tree first, and a snapshot
  // with a container layer (whose root/ entries come first) must be refused with it untouched.
  let first: IteratorResult<RestoredEntry>;
  try {
    first = await entries.next();
    if (!first.done && !first.value.entry.path.startsWith(`${WORK}/`)) throw outside(first.value.entry);
  } catch (err) {
    await entries.return?.(undefined);
    throw err;
  }
  const archive = pack();
  const closed = new Promise<never>((_, reject) =>
    archive.once('close', () => reject(new Error('the archive into the sandbox was closed'))),
  );
  closed.catch(() => {});
  const counts = { entries: 0, bytes: 0 };
  // Started once the exec reads the archive: a snapshot refused before its first entry (a member
  // cut short is seen at once) destroys the archive, and a reader that comes to an already
  // destroyed tar-stream pack waits for an end that never comes.
  const feed = async () => {
    try {
      for (let next = first; !next.done; next = await entries.next()) {
        const { entry, content } = next.value;
        if (!entry.path.startsWith(`${WORK}/`)) throw outside(entry);
        counts.entries++;
        await addToArchive(archive, closed, entry, content);
        counts.bytes += entry.type === 'file' ? entry.size : 0;
      }
      archive.finalize();
    } catch (err) {
      archive.destroy(err as Error);
      await entries.return?.(undefined);
      throw err;
    }
  };
  const thaw = await freeze();
  try {
    const run = await exec(
      ['sh', '-c', RESTORE_SCRIPT, 'sandstream-restore', workdir],
      archive as AsyncIterable<Buffer>,
    );
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
