import { statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDynamicLoader } from '../inject.js';

/** File name of the native spawner; it ships in the runtime's lib directory next to the loader. */
export const SPAWNER_NAME = 'sandstream-spawner';

/** What the running process knows about itself; a parameter so the search can be tested. */
export interface SpawnerSearchFacts {
  execPath: string;
  argv0: string;
  cwd: string;
  /** Directory of the agent's code (this module, or the bundle it was built into). */
  codeDir: string;
}

export function currentSearchFacts(): SpawnerSearchFacts {
  return {
    execPath: process.execPath,
    argv0: process.argv0,
    cwd: process.cwd(),
    codeDir: dirname(fileURLToPath(import.meta.url)),
  };
}

function isExecutableFile(path: string): boolean {
  try {
    const info = statSync(path);
    return info.isFile() && (info.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

/**
 * Where a file of the runtime's lib directory (the spawner, the blob release) can be, most
 * specific first:
 *
 * - started through the bundled loader (`/shared/lib/ld-linux-x86-64.so.2 … /shared/sandstream-agent`):
 *   the loader's own directory, which is the runtime's lib directory;
 * - the single executable started directly: `lib/` beside it (the injected layout) or
 *   `runtime/lib/` (agent/dist after a build);
 * - `node dist/…`: `runtime/lib/` in the code's directory or its parent (dist/ for the bundle,
 *   dist/process/ for the compiled modules).
 */
export function runtimeFileCandidates(facts: SpawnerSearchFacts, fileName: string): string[] {
  const dirs: string[] = [];
  if (isDynamicLoader(facts.execPath)) dirs.push(dirname(facts.execPath));
  const programs = [facts.execPath, resolve(facts.cwd, facts.argv0)];
  for (const program of programs)
    dirs.push(join(dirname(program), 'lib'), join(dirname(program), 'runtime', 'lib'));
  dirs.push(join(facts.codeDir, 'runtime', 'lib'), join(facts.codeDir, '..', 'runtime', 'lib'));
  return [...new Set(dirs.map((d) => join(d, fileName)))];
}

export function spawnerCandidates(facts: SpawnerSearchFacts): string[] {
  return runtimeFileCandidates(facts, SPAWNER_NAME);
}

/**
 * The `--spawner` setting: `auto` (the default) searches the candidates, `none` means Node's
 * own child_process, anything else is the path of the helper. Returns the path to use, or null
 * with the reason for running without it.
 */
export function locateSpawner(
  setting: string,
  facts: SpawnerSearchFacts = currentSearchFacts(),
): { path: string } | { path: null; reason: string } {
  if (setting === 'none') return { path: null, reason: '--spawner none' };
  if (setting !== 'auto') {
    const path = resolve(facts.cwd, setting);
    if (!isExecutableFile(path)) throw new Error(`--spawner ${path} is not an executable file`);
    return { path };
  }
  const candidates = spawnerCandidates(facts);
  const found = candidates.find(isExecutableFile);
  return found ? { path: found } : { path: null, reason: `no ${SPAWNER_NAME} in ${candidates.join(', ')}` };
}
