import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readSync, realpathSync, statSync, writeSync } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { isSea } from 'node:sea';

/**
 * `sandstream-agent --inject <dir>`: the init-container half of the injection pattern. The
 * carrier image runs it once; it leaves behind, in the shared volume,
 *
 *   <dir>/sandstream-agent   the single executable (Node SEA)
 *   <dir>/lib/               the glibc loader and every library the executable needs
 *
 * so that any image — glibc, musl or no libc at all — can start the agent with
 *
 *   /shared/lib/ld-linux-x86-64.so.2 --library-path /shared/lib /shared/sandstream-agent ...
 *
 * The libraries are only ever found through the loader's --library-path, which applies to the
 * agent process alone; nothing sets LD_LIBRARY_PATH, so the steps' children keep using the
 * image's own libc.
 */

/** File name of the glibc dynamic loader the runtime ships (x86-64). */
export const LOADER_NAME = 'ld-linux-x86-64.so.2';
/** File name of the executable inside the target directory. */
export const AGENT_BINARY_NAME = 'sandstream-agent';
/** Overrides the executable's location when the process cannot work it out (see locateAgentFiles). */
export const AGENT_BINARY_ENV = 'SANDSTREAM_AGENT_BINARY';

export class InjectError extends Error {
  override name = 'InjectError';
}

export interface AgentFiles {
  /** The single executable to copy. */
  binary: string;
  /** Directory holding LOADER_NAME and the shared libraries. */
  libDir: string;
}

/** What the running process knows about itself; a parameter so the search can be tested. */
export interface ProcessFacts {
  execPath: string;
  argv0: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  isSea: boolean;
}

function currentProcessFacts(): ProcessFacts {
  return {
    execPath: process.execPath,
    argv0: process.argv0,
    cwd: process.cwd(),
    env: process.env,
    isSea: isSea(),
  };
}

/** True for the glibc (or musl) dynamic loader, which is what /proc/self/exe names when the agent was started through it. */
export function isDynamicLoader(path: string): boolean {
  return /^ld-(linux|musl)[\w.-]*\.so(\.\d+)*$/.test(basename(path));
}

export function isRegularFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * Finds the agent's own executable and its runtime libraries.
 *
 * Started directly, process.execPath (= /proc/self/exe) is the executable. Started through the
 * bundled loader (`ld-linux-x86-64.so.2 --library-path … /shared/sandstream-agent`), the kernel
 * exec'd the loader, so execPath is the loader; the loader then hands the program the path it was
 * given as argv[0], which Node keeps in process.argv0. SANDSTREAM_AGENT_BINARY beats both.
 */
export function locateAgentFiles(facts: ProcessFacts = currentProcessFacts()): AgentFiles {
  if (!facts.isSea && !facts.env[AGENT_BINARY_ENV]) {
    throw new InjectError(
      `--inject needs the single executable (agent/dist/${AGENT_BINARY_NAME}); this process is plain Node ` +
        `(${facts.execPath}). Build it with "npm run build -w agent" or set ${AGENT_BINARY_ENV}.`,
    );
  }
  const startedViaLoader = isDynamicLoader(facts.execPath);
  const candidates: string[] = [];
  const fromEnv = facts.env[AGENT_BINARY_ENV];
  if (fromEnv) candidates.push(resolve(facts.cwd, fromEnv));
  if (!startedViaLoader) candidates.push(facts.execPath);
  // The loader opens its program argument as a path relative to its working directory (it does
  // not search PATH), and passes that same string on as argv[0].
  if (facts.argv0) candidates.push(resolve(facts.cwd, facts.argv0));

  const binary = candidates.find((c) => isRegularFile(c) && !isDynamicLoader(c));
  if (!binary) {
    throw new InjectError(
      `cannot find the agent executable (execPath ${facts.execPath}, argv0 ${facts.argv0}); ` +
        `set ${AGENT_BINARY_ENV} to its path`,
    );
  }
  const realBinary = realpathSync(binary);
  const libCandidates = [
    // The loader we were started through sits in the lib directory by construction.
    ...(startedViaLoader ? [dirname(realpathSync(facts.execPath))] : []),
    join(dirname(realBinary), 'lib'), // carrier image and /shared layout
    join(dirname(realBinary), 'runtime', 'lib'), // agent/dist layout after a build
  ];
  const libDir = libCandidates.find((d) => isRegularFile(join(d, LOADER_NAME)));
  if (!libDir) {
    throw new InjectError(
      `cannot find the agent runtime libraries (${LOADER_NAME}) in any of: ${libCandidates.join(', ')}`,
    );
  }
  return { binary: realBinary, libDir };
}

const EXEC_MODE = 0o755;
/**
 * The size of each write of the copy. A process maps a file's page-cache folios whole on first
 * touch, and the kernel (6.x, ext4 and others with large folios) sizes a written file's folios
 * by the writes that filled it: the executable written in 1 MB writes gave the idle agent 49 MB
 * of file-backed RSS, in `copyFile`'s 128 KB writes 41.5 MB, in 16 KB writes 38.7 MB — as little
 * as the same file read back from disk. Most of the agent's RSS is those pages, and its sandbox's
 * memory limit counts them (docs/benchmarks.md, agent RSS). 16 KB costs no more time than
 * `copyFile` (0.12 s for the 100 MB executable).
 */
const COPY_CHUNK_BYTES = 16 * 1024;

/**
 * Copies `source` to a new file `destination` in COPY_CHUNK_BYTES writes (also the build's last
 * step, scripts/build-sea.mjs, so an agent run from agent/dist maps as little).
 */
export function copyInSmallWrites(source: string, destination: string): void {
  const buffer = Buffer.allocUnsafe(COPY_CHUNK_BYTES);
  const from = openSync(source, 'r');
  try {
    const to = openSync(destination, 'wx');
    try {
      for (let n = readSync(from, buffer); n > 0; n = readSync(from, buffer)) {
        for (let at = 0; at < n; ) at += writeSync(to, buffer, at, n - at);
      }
    } finally {
      closeSync(to);
    }
  } finally {
    closeSync(from);
  }
}

/** Copies to a hidden temporary name in the same directory, then renames over the final name. */
async function copyAtomically(source: string, destination: string, mode: number): Promise<void> {
  const temp = join(dirname(destination), `.${basename(destination)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    // Dereferences symlinks: the runtime must hold real files, not links into the carrier image.
    // Synchronous: --inject is a one-shot init container with nothing else to do meanwhile.
    copyInSmallWrites(source, temp);
    await chmod(temp, mode);
    await rename(temp, destination);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}

/**
 * Copies the agent's files into targetDir. Libraries go first and the executable last, each via
 * temp + rename, so a container that waits for `<targetDir>/sandstream-agent` to exist never sees a
 * half-written binary or a binary whose libraries are still missing. Everything is made readable
 * and executable by any user, because the sandbox may run as non-root.
 */
export async function injectFiles(files: AgentFiles, targetDir: string): Promise<void> {
  if (!targetDir) throw new InjectError('--inject needs a target directory');
  const target = resolve(targetDir);
  if (resolve(files.libDir) === join(target, 'lib')) {
    throw new InjectError(`--inject target ${target} is where the agent already runs from`);
  }
  const libTarget = join(target, 'lib');
  await mkdir(libTarget, { recursive: true });
  await chmod(target, EXEC_MODE).catch(() => {
    // A mount point owned by someone else (e.g. a read-only parent) keeps its mode; the files'
    // own modes still make them usable.
  });
  await chmod(libTarget, EXEC_MODE);
  for (const entry of await readdir(files.libDir, { withFileTypes: true })) {
    if (entry.isDirectory()) continue;
    await copyAtomically(join(files.libDir, entry.name), join(libTarget, entry.name), EXEC_MODE);
  }
  await copyAtomically(files.binary, join(target, AGENT_BINARY_NAME), EXEC_MODE);
}

/** The entry main.ts calls for `--inject <dir>`. */
export async function injectAgent(targetDir: string): Promise<void> {
  await injectFiles(locateAgentFiles(), targetDir);
}
