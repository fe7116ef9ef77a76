/**
 * The lean `exec`'s entry (bundled by scripts/build-cli.mjs into dist/bundle/sandstream-exec.cjs;
 * bin/sandstream runs it for `sandstream exec …` when the CLI's snapshot is in use). What the
 * lean path does not handle runs the full CLI's snapshot in a child, with the same words.
 *
 * The build fills in, as constants: the sandbox-exec script, and the digest of the compiled
 * files this bundle was made from (as the snapshot records them, snapshot-inputs.ts). When those
 * changed since (a `tsc -b` alone), the full CLI runs, and says so as it does.
 */
import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { FullDecoders } from './lean-decode.js';
import { FALL_THROUGH, runLeanExec } from './lean-exec.js';

declare const __LEAN_EXEC_LUA__: string;
declare const __LEAN_EXEC_LUA_SHA__: string;
declare const __LEAN_EXEC_INPUTS__: readonly string[];
declare const __LEAN_EXEC_BUILT_FROM__: string;
/** [size, mtimeMs] of each input as the build saw it. */
declare const __LEAN_EXEC_INPUT_STATS__: readonly (readonly [number, number])[];

const bundleDir = __dirname;
const packageDir = resolve(bundleDir, '..', '..');
const argv = process.argv.slice(2);

/**
 * Whether the compiled files are the ones this bundle was built from. Their size and time as the
 * build saw them first (a stat each): loading node:crypto and hashing cost ~7 ms, a quarter of
 * what the goal leaves; the digest only when those differ, as after a turbo cache restore (every
 * file written anew, same contents), so a rewrite with the same contents still counts as fresh.
 */
function inputsUnchanged(): boolean {
  try {
    if (
      __LEAN_EXEC_INPUTS__.every((file, i) => {
        const stat = statSync(resolve(packageDir, file));
        const [size, mtimeMs] = __LEAN_EXEC_INPUT_STATS__[i] ?? [];
        return stat.size === size && stat.mtimeMs === mtimeMs;
      })
    )
      return true;
  } catch {
    return false;
  }
  const { createHash } = require('node:crypto') as typeof import('node:crypto');
  const hash = createHash('sha1');
  try {
    for (const file of __LEAN_EXEC_INPUTS__) {
      hash.update(file);
      hash.update(readFileSync(resolve(packageDir, file)));
    }
  } catch {
    return false;
  }
  return hash.digest('hex') === __LEAN_EXEC_BUILT_FROM__;
}

/** The full CLI, from its snapshot (the launcher checked it was built by this node), in a child. */
function runFullCli(): void {
  const { spawn } = require('node:child_process') as typeof import('node:child_process');
  const child = spawn(
    process.execPath,
    ['--snapshot-blob', join(bundleDir, 'sandstream-cli.blob'), '--', ...argv],
    { stdio: 'inherit' },
  );
  // As snapshot-main.ts' runModulesInstead: SIGINT at a terminal reaches the child itself.
  const pass = (signal: NodeJS.Signals) => child.kill(signal);
  process
    .on('SIGTERM', pass)
    .on('SIGHUP', pass)
    .on('SIGINT', () => {});
  child.on('error', (err) => {
    process.stderr.write(`sandstream: cannot start the CLI: ${err.message}\n`);
    process.exit(3);
  });
  child.on('exit', (code, signal) => {
    const { constants } = require('node:os') as typeof import('node:os');
    process.exitCode = code ?? 128 + (signal ? constants.signals[signal] : 0);
    process.exit();
  });
}

/** Ends the process once stdout and stderr are flushed (main.ts exitWhenFlushed). */
function exitWhenFlushed(code: number): void {
  process.exitCode = code;
  let pending = 2;
  const flushed = () => {
    pending -= 1;
    if (pending === 0) process.exit();
  };
  process.stdout.write('', flushed);
  process.stderr.write('', flushed);
}

if (!inputsUnchanged()) runFullCli();
else
  runLeanExec({
    argv,
    env: process.env,
    searchFrom: [process.cwd(), join(packageDir, 'dist', 'cli')],
    lua: { source: __LEAN_EXEC_LUA__, sha: __LEAN_EXEC_LUA_SHA__ },
    full: () =>
      (require(join(bundleDir, 'sandstream-exec-full.cjs')) as { fullDecoders: FullDecoders }).fullDecoders,
    out: process.stdout,
    err: process.stderr,
    signals: process,
  }).then(
    (outcome) => (outcome === FALL_THROUGH ? runFullCli() : exitWhenFlushed(outcome)),
    (err: unknown) => {
      process.stderr.write(`sandstream: ${(err as Error).message ?? String(err)}\n`);
      exitWhenFlushed(125);
    },
  );
