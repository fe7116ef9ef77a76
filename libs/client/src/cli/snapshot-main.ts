/**
 * The bundled CLI's entry (scripts/build-cli.mjs). Built into a V8 start-up snapshot, every
 * module of the CLI and its dependencies is loaded and initialised once, at build time, and each
 * `sandstream …` deserialises that heap instead of compiling and running them again: most of
 * the CLI's start-up beyond Node's own (docs/benchmarks.md, "CLI start-up").
 *
 * Nothing here may read the environment, argv, cwd or clocks at load, except what the build
 * means it to (the snapshot's inputs): that happened at build. Run as a plain script
 * (`node sandstream-cli.cjs …`, no snapshot), it runs the CLI directly.
 */
import { createRequire } from 'node:module';
import { constants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startupSnapshot } from 'node:v8';
import { runCli } from './main.js';
import { digestOfInputs, inputsFromEnv } from './snapshot-inputs.js';
import { warmUpExecPath } from './snapshot-warm-up.js';

if (startupSnapshot.isBuildingSnapshot()) {
  // libs/client, from dist/cli/ where this module was compiled.
  const builtIn = fileURLToPath(new URL('../..', import.meta.url));
  const inputs = inputsFromEnv(process.env);
  const builtFrom = digestOfInputs(builtIn, inputs);
  if (builtFrom === undefined) throw new Error(`cannot read the snapshot's inputs ${inputs.join(', ')}`);
  warmUpExecPath();
  startupSnapshot.setDeserializeMainFunction(() => {
    const argv = process.argv.slice(1);
    const packageDir = packageDirOfBlob(process.execArgv) ?? builtIn;
    if (digestOfInputs(packageDir, inputs) === builtFrom) runCli(argv);
    else runModulesInstead(packageDir, argv);
  });
}

/** libs/client from `--snapshot-blob <libs/client/dist/bundle/x.blob>` (wherever the package now is). */
function packageDirOfBlob(execArgv: readonly string[]): string | undefined {
  const at = execArgv.findIndex((a) => a === '--snapshot-blob' || a.startsWith('--snapshot-blob='));
  const blob = at < 0 ? undefined : (execArgv[at]?.split('=')[1] ?? execArgv[at + 1]);
  return blob ? resolve(dirname(blob), '..', '..') : undefined;
}

/**
 * The compiled CLI changed since the snapshot was made (a `tsc -b` without the client's build):
 * its modules run instead, in a child (a snapshot has no ES module loader), said on stderr so
 * nobody wonders why commands got slower. SIGTERM and SIGHUP are passed on; SIGINT is not: a
 * Ctrl-C at the terminal reaches the child itself, and a second one would end it before `exec`
 * cancelled its command.
 */
function runModulesInstead(packageDir: string, argv: string[]): void {
  if (!process.env.SANDSTREAM_NO_SNAPSHOT_WARNING)
    process.stderr.write(
      "sandstream: the CLI's start-up snapshot was built from other compiled files (a `tsc -b` since the last `npm run build`?); starting slower from modules (`npm run build -w @sandstream/client` makes it)\n",
    );
  // Required here, on this path only: child_process is one of the builtins a Node 20 snapshot
  // does not hold (scripts/build-cli.mjs), and its stand-in serves no named import.
  const { spawn } = createRequire(import.meta.url)(
    'node:child_process',
  ) as typeof import('node:child_process');
  const child = spawn(process.execPath, [join(packageDir, 'bin', 'sandstream.mjs'), ...argv], {
    stdio: 'inherit',
  });
  const pass = (signal: NodeJS.Signals) => child.kill(signal);
  process
    .on('SIGTERM', pass)
    .on('SIGHUP', pass)
    .on('SIGINT', () => {});
  child.on('error', (err) => {
    process.stderr.write(`sandstream: cannot start the CLI's modules: ${err.message}\n`);
    process.exitCode = 3;
  });
  child.on('exit', (code, signal) => {
    process.exitCode = code ?? 128 + (signal ? constants.signals[signal] : 0);
    process.exit();
  });
}
