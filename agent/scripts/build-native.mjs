#!/usr/bin/env node
/**
 * Compiles the agent's two native pieces, which build-sea.mjs puts into dist/runtime/lib/ and
 * --inject copies into the sandbox with the loader and libraries:
 *
 * - sandstream-spawner (native/spawner.c): a static executable (no libc needed at run time, so
 *   it runs in glibc, musl and libc-less images alike) that starts the run steps' processes;
 * - sandstream-sea-release.node (native/sea-blob-release.c): a shared object the single
 *   executable loads after its boot to give back its startup blob's pages;
 * - sandstream-source-release.node (native/source-release.cc): a Node addon that moves the
 *   bundle's source out of the V8 heap onto the executable's own bytes.
 *
 * Needs a C compiler and a static libc ($CC, else cc; Debian: gcc and libc6-dev), a C++ compiler
 * ($CXX, else c++; Debian: g++) and the headers of the node that runs this (include/node beside
 * its bin/, which Node's packages and tarballs ship): the addon must match the V8 the executable
 * is made of, which is this very node.
 *
 * Usage: node agent/scripts/build-native.mjs [dir]   (default dist/runtime/lib)
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const agentDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const defaultDir = join(agentDir, 'dist', 'runtime', 'lib');
export const SPAWNER_NAME = 'sandstream-spawner';
export const SEA_RELEASE_NAME = 'sandstream-sea-release.node';
export const SOURCE_RELEASE_NAME = 'sandstream-source-release.node';

const WARNINGS = ['-Wall', '-Wextra', '-Wno-unused-parameter'];

/** Compiles one C (or, with cxx, C++) source into `out` (written under a temporary name, then renamed). */
async function compile(source, out, flags, cxx = false) {
  const cc = cxx ? process.env.CXX || 'c++' : process.env.CC || 'cc';
  await mkdir(dirname(out), { recursive: true });
  const temp = `${out}.partial`;
  try {
    execFileSync(cc, ['-O2', ...flags, ...WARNINGS, '-o', temp, join(agentDir, 'native', source)], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  } catch (err) {
    await rm(temp, { force: true });
    const why = err.code === 'ENOENT' ? `no ${cxx ? 'C++' : 'C'} compiler (${cc})` : `${cc} failed`;
    throw new Error(`building ${source}: ${why}; install gcc, g++ and libc6-dev, or set CC/CXX`);
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

/** The headers of the node running this build: the executable is a copy of it. */
function nodeIncludeDir() {
  const dir = join(dirname(process.execPath), '..', 'include', 'node');
  if (!existsSync(join(dir, 'node.h')))
    throw new Error(`no Node headers in ${dir} (node.h): the node running the build ships none`);
  return dir;
}

export function buildSourceRelease(out = join(defaultDir, SOURCE_RELEASE_NAME)) {
  return compile(
    'source-release.cc',
    out,
    // -Wno-cast-function-type: node.h's own registration macro casts one.
    [
      '-std=c++17',
      '-shared',
      '-fPIC',
      '-s',
      '-fno-exceptions',
      '-fno-rtti',
      '-Wno-cast-function-type',
      `-I${nodeIncludeDir()}`,
    ],
    true,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const dir = process.argv[2] ? resolve(process.argv[2]) : defaultDir;
  Promise.all([
    buildSpawner(join(dir, SPAWNER_NAME)),
    buildSeaRelease(join(dir, SEA_RELEASE_NAME)),
    buildSourceRelease(join(dir, SOURCE_RELEASE_NAME)),
  ]).then(
    (outs) => process.stderr.write(`[build-native] ${outs.join(', ')}\n`),
    (err) => {
      process.stderr.write(`[build-native] ${err.message}\n`);
      process.exit(1);
    },
  );
}
