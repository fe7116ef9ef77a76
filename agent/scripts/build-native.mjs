#!/usr/bin/env node
/**
 * Compiles the agent's two native pieces, which build-sea.mjs puts into dist/runtime/lib/ and
 * --inject copies into the sandbox with the loader and libraries:
 *
 * - sandstream-spawner (native/spawner.c): a static executable (no libc needed at run time, so
 *   it runs in glibc, musl and libc-less images alike) that starts the run steps' processes;
 * - sandstream-sea-release.node (native/sea-blob-release.c): a shared object the single
 *   executable loads after its boot to give back its startup blob's pages.
 *
 * Needs a C compiler and a static libc ($CC, else cc; Debian: gcc and libc6-dev).
 *
 * Usage: node agent/scripts/build-native.mjs [dir]   (default dist/runtime/lib)
 */
import { execFileSync } from 'node:child_process';
import { mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const agentDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const defaultDir = join(agentDir, 'dist', 'runtime', 'lib');
export const SPAWNER_NAME = 'sandstream-spawner';
export const SEA_RELEASE_NAME = 'sandstream-sea-release.node';

const WARNINGS = ['-Wall', '-Wextra', '-Wno-unused-parameter'];

/** Compiles one C source into `out` (written under a temporary name, then renamed). */
async function compile(source, out, flags) {
  const cc = process.env.CC || 'cc';
  await mkdir(dirname(out), { recursive: true });
  const temp = `${out}.partial`;
  try {
    execFileSync(cc, ['-O2', ...flags, ...WARNINGS, '-o', temp, join(agentDir, 'native', source)], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  } catch (err) {
    await rm(temp, { force: true });
    const why = err.code === 'ENOENT' ? `no C compiler (${cc})` : `${cc} failed`;
    throw new Error(`building ${source}: ${why}; install gcc and libc6-dev, or set CC`);
  }
  await rename(temp, out);
  return out;
}

export function buildSpawner(out = join(defaultDir, SPAWNER_NAME)) {
  return compile('spawner.c', out, ['-static', '-s']);
}

export function buildSeaRelease(out = join(defaultDir, SEA_RELEASE_NAME)) {
  return compile('sea-blob-release.c', out, ['-shared', '-fPIC', '-s']);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const dir = process.argv[2] ? resolve(process.argv[2]) : defaultDir;
  Promise.all([buildSpawner(join(dir, SPAWNER_NAME)), buildSeaRelease(join(dir, SEA_RELEASE_NAME))]).then(
    (outs) => process.stderr.write(`[build-native] ${outs.join(', ')}\n`),
    (err) => {
      process.stderr.write(`[build-native] ${err.message}\n`);
      process.exit(1);
    },
  );
}
