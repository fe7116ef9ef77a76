/**
 * A tiny stand-in entry for the single-executable pipeline: `--inject <dir>` does exactly what the
 * real agent does, and `--probe [-- cmd args...]` prints what the process sees of itself (argv,
 * execPath, /proc/self/exe) and then runs a child, so a test can check how Node's SEA behaves when
 * started through the bundled loader, and that the loader's library path does not reach children.
 * Build it with `node scripts/build-sea.mjs --no-snapshot --entry scripts/probe-entry.ts --out <file>`.
 */
import { spawnSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { isSea } from 'node:sea';
import { injectAgent } from '../src/inject.js';

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args[0] === '--inject') {
    await injectAgent(args[1] ?? '');
    return 0;
  }
  if (args[0] === '--probe') {
    const facts = {
      argv: process.argv,
      argv0: process.argv0,
      execPath: process.execPath,
      procSelfExe: readlinkSync('/proc/self/exe'),
      isSea: isSea(),
      ldLibraryPath: process.env.LD_LIBRARY_PATH ?? null,
    };
    process.stdout.write(`${JSON.stringify(facts)}\n`);
    const child = args.indexOf('--');
    if (child >= 0 && args[child + 1]) {
      const r = spawnSync(args[child + 1]!, args.slice(child + 2), { stdio: 'inherit' });
      return r.status ?? 1;
    }
    return 0;
  }
  process.stderr.write('usage: probe --inject <dir> | --probe [-- cmd args...]\n');
  return 64;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(3);
  },
);
