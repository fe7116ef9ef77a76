import { lstat, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { packTree, unpackTar } from '@sandstream/wire';
import type { SandstreamClient } from '../client.js';
import type { Sandbox } from '../sandbox.js';
import { SandboxFileError } from '../sandbox-errors.js';
import { ExitCodes } from './exit-codes.js';
import { UsageError } from './flags.js';

// `sandstream cp`, by `docker cp`'s rules (https://docs.docker.com/reference/cli/docker/container/cp/):
//
//   SRC is a file:  DEST missing → the file is written as DEST (DEST ending in / → error: the
//                   directory must exist); DEST a file → overwritten; DEST a directory → DEST/<name>.
//   SRC is a dir:   DEST missing → created, with SRC's contents; DEST a file → error;
//                   DEST a directory → DEST/<name>, or with SRC ending in /. its contents in DEST.
//   SRC ending in / (or /.) must be a directory.
//
// Each side is looked at before anything moves, so an impossible copy changes nothing.

/** A path that is not there, on either side: the CLI exits 4 (not found), as for a sandbox id. */
export class CopyPathNotFoundError extends Error {
  override readonly name = 'CopyPathNotFoundError';
}

/** A copy `docker cp` refuses (a directory onto a file, a file where a directory is asked for). */
export class CopyRefusedError extends Error {
  override readonly name = 'CopyRefusedError';
}

type Kind = 'file' | 'directory' | 'missing';

const REMOTE = /^([A-Za-z0-9][A-Za-z0-9._:-]*):(\/.*|[^/].*)$/;

/** `<id>:<path>` as its two parts, or null for a local path. */
function remoteSide(spec: string): { id: string; path: string } | null {
  const match = REMOTE.exec(spec);
  return match ? { id: match[1] as string, path: match[2] as string } : null;
}

/** What the CLI needs from a path as given: does it ask for a directory, or for its contents. */
function shape(given: string): { dirOnly: boolean; contents: boolean } {
  return { dirOnly: given.endsWith('/') || given.endsWith('/.'), contents: given.endsWith('/.') };
}

async function localKind(p: string): Promise<Kind> {
  try {
    return (await stat(p)).isDirectory() ? 'directory' : 'file';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw err;
  }
}

/** A sandbox path's kind, from a one-entry listing (a file's listing is refused as "not a directory"). */
async function remoteKind(sandbox: Sandbox, p: string): Promise<Kind> {
  try {
    await sandbox.files.list(p, { maxDepth: 1, maxEntries: 1 });
    return 'directory';
  } catch (err) {
    if (!(err instanceof SandboxFileError)) throw err;
    if (err.code === 'not_found') return 'missing';
    if (err.code === 'invalid_step' && /not a directory/.test(err.message)) return 'file';
    throw err;
  }
}

/**
 * Where SRC lands, as a directory to unpack into and the name its top entry takes there; the
 * rules above. The name is SRC's own last segment unless DEST names it.
 */
export function placement(
  src: { given: string; kind: 'file' | 'directory' },
  dest: { given: string; kind: Kind },
  dirname: (p: string) => string,
  basename: (p: string) => string,
): { dir: string; name: string } {
  const source = shape(src.given);
  if (src.kind === 'file' && source.dirOnly) throw new CopyRefusedError(`${src.given} is not a directory`);
  const srcName = basename(src.given.replace(/\/\.?$/, '')) || '.';
  const trimmed = dest.given.replace(/\/+$/, '') || '/';
  if (dest.kind === 'missing') {
    if (src.kind === 'file' && dest.given.endsWith('/'))
      throw new CopyPathNotFoundError(`destination directory ${dest.given} does not exist`);
    return { dir: dirname(trimmed), name: basename(trimmed) };
  }
  if (dest.kind === 'file') {
    if (src.kind === 'directory')
      throw new CopyRefusedError(`cannot copy a directory (${src.given}) onto a file (${dest.given})`);
    if (dest.given.endsWith('/')) throw new CopyRefusedError(`${dest.given} is not a directory`);
    return { dir: dirname(trimmed), name: basename(trimmed) };
  }
  // DEST is a directory: into it under SRC's name, or (SRC/.) its contents merged into it.
  if (src.kind === 'directory' && source.contents) {
    const name = basename(trimmed);
    // `.` or `/` have no name to unpack under: the contents go straight in, as `.`.
    return name && name !== '.' && name !== '..'
      ? { dir: dirname(trimmed), name }
      : { dir: trimmed, name: '.' };
  }
  return { dir: trimmed, name: srcName };
}

/**
 * `cp <src> <id>:<path>` and `cp <id>:<path> <dst>`. Trees travel as tar streams; the top entry
 * is renamed on the way so that it lands where docker cp's rules put it.
 */
export async function copyFiles(client: SandstreamClient, from: string, to: string): Promise<number> {
  const source = remoteSide(from);
  const target = remoteSide(to);
  if (source && target)
    throw new UsageError('cp copies between this machine and a sandbox, not between sandboxes');
  if (!source && !target) throw new UsageError('cp needs a sandbox side: <id>:<path>');
  if (target) {
    const { id, path: remotePath } = target;
    const srcKind = await localKind(from);
    if (srcKind === 'missing') throw new CopyPathNotFoundError(`${from}: no such file or directory`);
    const sandbox = await client.sandboxes.connect(id);
    const destKind = await remoteKind(sandbox, remotePath);
    const { dir, name } = placement(
      { given: from, kind: srcKind },
      { given: remotePath, kind: destKind },
      path.posix.dirname,
      path.posix.basename,
    );
    const tar = await packTree(from.replace(/\/\.?$/, '') || from, undefined, { name });
    const sent = await sandbox.files.upload(tar, dir);
    process.stderr.write(`copied ${sent.files} files (${sent.bytes} bytes of tar) to ${id}:${remotePath}\n`);
    return ExitCodes.succeeded;
  }
  const { id, path: remotePath } = source as { id: string; path: string };
  const sandbox = await client.sandboxes.connect(id);
  const srcKind = await remoteKind(sandbox, remotePath);
  if (srcKind === 'missing')
    throw new CopyPathNotFoundError(`${id}:${remotePath}: no such file or directory`);
  const destKind = await localKind(to);
  const { dir, name } = placement(
    { given: remotePath, kind: srcKind },
    { given: to, kind: destKind },
    path.dirname,
    path.basename,
  );
  if ((await localKind(dir)) !== 'directory')
    throw new CopyPathNotFoundError(`destination directory ${dir} does not exist`);
  // Unpacked beside where it goes (same file system), then moved into place: the tar's top entry
  // carries the sandbox's name for it, whatever this side calls it.
  const staging = await mkdtemp(path.join(dir, '.sandstream-cp-'));
  try {
    await unpackTar(sandbox.files.download(remotePath), staging);
    const [top] = await readdir(staging);
    if (top === undefined) throw new Error(`the download of ${id}:${remotePath} was empty`);
    await moveInto(path.join(staging, top), path.join(dir, name));
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  process.stderr.write(`copied ${id}:${remotePath} to ${to}\n`);
  return ExitCodes.succeeded;
}

/**
 * Moves `from` to `to`, merging into a directory already there (as tar would unpack over it):
 * a file replaces what had its name, a directory's entries are moved in one by one.
 */
async function moveInto(from: string, to: string): Promise<void> {
  const existing = await lstat(to).catch(() => null);
  const incoming = await lstat(from);
  if (existing?.isDirectory() && incoming.isDirectory()) {
    for (const entry of await readdir(from)) await moveInto(path.join(from, entry), path.join(to, entry));
    return;
  }
  if (existing) await rm(to, { recursive: true, force: true });
  await rename(from, to);
}
