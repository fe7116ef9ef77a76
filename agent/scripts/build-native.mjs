#!/usr/bin/env node
/**
 * Compiles agent/native/spawner.c into a static executable (no libc needed at run time, so it
 * runs in glibc, musl and libc-less images alike). build-sea.mjs calls it to put the helper into
 * dist/runtime/lib/, which --inject copies into the sandbox with the loader and libraries.
 *
 * Needs a C compiler and a static libc ($CC, else cc; Debian: gcc and libc6-dev).
 *
 * Usage: node agent/scripts/build-spawner.mjs [out]   (default dist/runtime/lib/sandstream-spawner)
 */
import { execFileSync } from 'node:child_process';
import { mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const agentDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const SPAWNER_SOURCE = join(agentDir, 'native', 'spawner.c');
export const SPAWNER_NAME = 'sandstream-spawner';

export async function buildSpawner(out = join(agentDir, 'dist', 'runtime', 'lib', SPAWNER_NAME)) {
  const cc = process.env.CC || 'cc';
  await mkdir(dirname(out), { recursive: true });
  const temp = `${out}.partial`;
  try {
    execFileSync(
      cc,
      ['-O2', '-static', '-s', '-Wall', '-Wextra', '-Wno-unused-parameter', '-o', temp, SPAWNER_SOURCE],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
  } catch (err) {
    await rm(temp, { force: true });
    const why = err.code === 'ENOENT' ? `no C compiler (${cc})` : `${cc} failed`;
    throw new Error(`building ${SPAWNER_NAME}: ${why}; install gcc and libc6-dev, or set CC`);
  }
  await rename(temp, out);
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  buildSpawner(process.argv[2] ? resolve(process.argv[2]) : undefined).then(
    (out) => process.stderr.write(`[build-spawner] ${out}\n`),
    (err) => {
      process.stderr.write(`[build-spawner] ${err.message}\n`);
      process.exit(1);
    },
  );
}
