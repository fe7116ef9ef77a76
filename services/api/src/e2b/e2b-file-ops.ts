import { posix } from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Sandbox } from '@sandstream/client';
import type { FileEntry } from '@sandstream/wire';
import { type EntryInfoSchema, FileType } from '../gen/filesystem/filesystem_pb.js';
import { HttpProblem } from '../problem.js';

/** E2B's EntryInfo as we answer it (int64 size a bigint, the mtime a Timestamp). */
export type EntryInfo = MessageInitShape<typeof EntryInfoSchema>;

/**
 * The file calls our agent has no step for (stat, mkdir, remove, move), run as small commands in
 * the sandbox through the same exec every command takes: argv, never a shell line built from a
 * path, so a path is only ever an argument.
 */

/** `stat -c` fields, `|`-separated: type, size, octal mode, permissions, owner, group, mtime. */
const STAT_FORMAT = '%F|%s|%a|%A|%U|%G|%Y';
/** The exit code our mkdir wrapper gives for a path that already exists. */
const EXISTS_EXIT = 17;

async function run(sandbox: Sandbox, argv: string[], what: string): Promise<string> {
  const result = await sandbox.exec(argv, { timeoutSeconds: 60 });
  if (result.exitCode === 0) return result.stdout;
  const stderr = result.stderr.trim() || result.errorMessage || `exit code ${result.exitCode}`;
  if (/No such file|cannot stat|not found/i.test(stderr))
    throw new HttpProblem(404, 'file-not-found', `${what}: ${stderr}`);
  throw new HttpProblem(400, 'file-error', `${what}: ${stderr}`);
}

function fileTypeOf(statType: string): FileType {
  if (statType.includes('directory')) return FileType.DIRECTORY;
  if (statType.includes('symbolic link')) return FileType.SYMLINK;
  return FileType.FILE;
}

export async function statEntry(sandbox: Sandbox, path: string): Promise<EntryInfo> {
  const out = await run(sandbox, ['stat', '-c', STAT_FORMAT, '--', path], `stat ${path}`);
  const [type = '', size = '0', mode = '0', permissions = '', owner = '', group = '', mtime = '0'] = out
    .trim()
    .split('|');
  return {
    name: posix.basename(path),
    type: fileTypeOf(type),
    path,
    size: BigInt(/^\d+$/.test(size) ? size : 0),
    mode: Number.parseInt(mode, 8),
    permissions,
    owner,
    group,
    modifiedTime: timestampFromMs(Number(mtime) * 1000),
  };
}

export async function makeDir(sandbox: Sandbox, path: string): Promise<EntryInfo> {
  const script = `if [ -e "$1" ]; then exit ${EXISTS_EXIT}; fi; mkdir -p -- "$1"`;
  const result = await sandbox.exec(['sh', '-c', script, 'mkdir', path], { timeoutSeconds: 60 });
  if (result.exitCode === EXISTS_EXIT) throw new HttpProblem(409, 'conflict', `${path} already exists`);
  if (result.exitCode !== 0)
    throw new HttpProblem(400, 'file-error', `mkdir ${path}: ${result.stderr.trim() || result.errorMessage}`);
  return statEntry(sandbox, path);
}

export async function remove(sandbox: Sandbox, path: string): Promise<void> {
  await run(sandbox, ['rm', '-rf', '--', path], `remove ${path}`);
}

export async function move(sandbox: Sandbox, source: string, destination: string): Promise<EntryInfo> {
  await run(sandbox, ['mv', '--', source, destination], `move ${source}`);
  return statEntry(sandbox, destination);
}

/** One of our list entries (relative to `dir`) as E2B's EntryInfo. */
export function listedEntry(dir: string, entry: FileEntry): EntryInfo {
  const path = posix.join(dir, entry.path);
  const type =
    entry.type === 'directory'
      ? FileType.DIRECTORY
      : entry.type === 'symlink'
        ? FileType.SYMLINK
        : FileType.FILE;
  return {
    name: posix.basename(path),
    type,
    path,
    size: BigInt(entry.sizeBytes),
    mode: 0,
    permissions: '',
    owner: '',
    group: '',
  };
}
