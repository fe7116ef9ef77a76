#!/usr/bin/env node
/**
 * Builds the `sandstream` CLI as one file and a V8 start-up snapshot of it (run after tsc, by the
 * package's `build`, so `npm run build`, `npm start` and `npm test` make it):
 *
 *   dist/bundle/sandstream-cli.cjs       the CLI and every dependency, bundled by esbuild
 *   dist/bundle/sandstream-cli.blob      a start-up snapshot of it (node --build-snapshot): every
 *                                        module already loaded and initialised
 *   dist/bundle/sandstream-cli-telemetry.cjs  the OpenTelemetry SDK, for `submit` with telemetry on
 *   dist/bundle/sandstream-cli-mcp.cjs   `sandstream mcp`: the MCP SDK and the tools
 *   dist/bundle/sandstream-cli.blob.node the node binary the blob was built with; bin/sandstream
 *                                        uses the blob only with that one (a blob is tied to it)
 *   dist/bundle/sandstream-exec.cjs      the lean `exec` (src/cli/lean-exec): no zod schemas, no
 *                                        ioredis; bin/sandstream runs it for `exec` beside the blob
 *   dist/bundle/sandstream-exec-full.cjs the schemas it falls back on for a record it is not sure of
 *
 * Why: loading the CLI's modules one by one cost ~250 ms of every command (issue 33);
 * docs/benchmarks.md, "CLI start-up", has the figures. A build where the snapshot cannot be made
 * keeps the bundle alone (bin/sandstream.mjs runs it) and says why.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
// Shared with the agent's single-executable build (agent/scripts/build-sea.mjs).
import {
  emptyOptionalModules,
  englishOnlyZodLocales,
  lazyBuiltins,
  node20CommonJs,
} from '../../../scripts/node20-bundle.mjs';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = join(packageDir, 'dist', 'bundle');
const bundlePath = join(outDir, 'sandstream-cli.cjs');
const blobPath = join(outDir, 'sandstream-cli.blob');

/**
 * Builtins the snapshot cannot or need not hold, stand-ins that load the real module when first
 * read: `node:tls`, whose bindings a Node 20 snapshot cannot hold; http, https (not loadable in a
 * Node 20 snapshot builder); the few others Node warns it has not verified there.
 */
const UNSNAPSHOTTABLE = ['tls', 'http', 'https', 'http2', 'child_process', 'worker_threads', 'tty'];

/**
 * Our own packages find files beside their modules (bus' Lua scripts in src/lua, npm start's
 * local.json up from the CLI): each of their modules keeps its own import.meta.url, the file it
 * was bundled from, not the bundle's.
 */
const ownModuleUrls = {
  name: 'own-module-urls',
  setup(b) {
    b.onLoad({ filter: /[\\/](libs|agent)[\\/][^\\/]+[\\/]dist[\\/].*\.js$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      if (!source.includes('import.meta.url')) return undefined;
      return {
        contents: source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)),
        loader: 'js',
      };
    });
  },
};

/**
 * The OpenTelemetry SDK (about 3 MB of the bundle's source) is loaded only by `submit` with
 * telemetry switched on: it is a bundle of its own beside the CLI's, required on that first use,
 * so the snapshot every command deserialises does not carry it.
 */
const telemetryBundlePath = join(outDir, 'sandstream-cli-telemetry.cjs');
const telemetryOnUse = {
  name: 'telemetry-on-use',
  setup(b) {
    b.onResolve({ filter: /^@sandstream\/telemetry$/ }, (args) =>
      args.kind === 'dynamic-import'
        ? { path: telemetryBundlePath, namespace: 'telemetry-on-use' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'telemetry-on-use' }, (args) => ({
      contents: `module.exports = require("node:module").createRequire(${JSON.stringify(args.path)})(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

/**
 * Packages only some commands use, each a bundle of its own beside the CLI's, required on first
 * use: BullMQ (submit, cancel: the jobs queue), NATS (logs from the archive), yaml (job files).
 * The SDK reaches them only through a dynamic import on that path, so `exec`, `files`, `status`
 * and the like start without them (issue 33). BullMQ's bundle uses the CLI's ioredis, handed over
 * on a global, so a connection the SDK made is the same class BullMQ expects.
 */
const onUsePackages = ['bullmq', 'nats', 'yaml'];
const sharedIoredis = 'Symbol.for("sandstream.cli.ioredis")';
const onUseBundlePath = (name) => join(outDir, `sandstream-cli-${name}.cjs`);
const packagesOnUse = {
  name: 'packages-on-use',
  setup(b) {
    b.onResolve({ filter: new RegExp(`^(${onUsePackages.join('|')})$`) }, (args) => ({
      path: args.path,
      namespace: 'package-on-use',
    }));
    b.onLoad({ filter: /.*/, namespace: 'package-on-use' }, (args) => {
      const file = JSON.stringify(onUseBundlePath(args.path));
      const share = args.path === 'bullmq' ? `globalThis[${sharedIoredis}] ??= require("ioredis");` : '';
      return {
        contents: `${share}module.exports = require("node:module").createRequire(${file})(${file});`,
        resolveDir: packageDir,
        loader: 'js',
      };
    });
  },
};
/** In BullMQ's own bundle: ioredis is the one the CLI's bundle handed over. */
const ioredisFromCli = {
  name: 'ioredis-from-cli',
  setup(b) {
    b.onResolve({ filter: /^ioredis$/ }, () => ({ path: 'ioredis', namespace: 'ioredis-from-cli' }));
    b.onLoad({ filter: /.*/, namespace: 'ioredis-from-cli' }, () => ({
      contents: `module.exports = globalThis[${sharedIoredis}] ?? require("ioredis");`,
      loader: 'js',
    }));
  },
};

/**
 * `sandstream mcp`'s server (libs/client/src/mcp: the MCP SDK and the tools) is a bundle of its
 * own, required on that command's first use: the snapshot every other command deserialises does
 * not carry the MCP SDK. main.ts reaches it only through `import('../mcp/index.js')`; the tools
 * match SDK errors by name, not class, since the bundle has its own copy of the SDK's modules.
 */
const mcpBundlePath = join(outDir, 'sandstream-cli-mcp.cjs');
const mcpOnUse = {
  name: 'mcp-on-use',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/mcp\/index\.js$/ }, (args) =>
      args.kind === 'dynamic-import' ? { path: mcpBundlePath, namespace: 'mcp-on-use' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'mcp-on-use' }, (args) => ({
      contents: `module.exports = require("node:module").createRequire(${JSON.stringify(args.path)})(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

/** Every bundle here: ESM sources that read import.meta.url get their bundle's, read when used. */
const commonjsBundle = {
  ...node20CommonJs,
  banner: {
    js: 'var __cliImportMeta = { get url() { return require("node:url").pathToFileURL(__filename).href; } };',
  },
  define: { 'import.meta.url': '__cliImportMeta.url' },
};

/** A side bundle (telemetry, the on-use packages): plain CommonJS, loaded by require at run time. */
const sideBundle = (entry, outfile, plugins) =>
  build({
    stdin: { contents: `module.exports = require(${JSON.stringify(entry)});`, resolveDir: packageDir },
    outfile,
    ...commonjsBundle,
    plugins: [emptyOptionalModules, ...plugins],
  });

await mkdir(outDir, { recursive: true });
await Promise.all([
  sideBundle(join(packageDir, '..', 'telemetry', 'dist', 'index.js'), telemetryBundlePath, []),
  ...onUsePackages.map((name) =>
    sideBundle(name, onUseBundlePath(name), name === 'bullmq' ? [ioredisFromCli] : []),
  ),
  sideBundle(join(packageDir, 'dist', 'mcp', 'index.js'), mcpBundlePath, [
    telemetryOnUse,
    packagesOnUse,
    ownModuleUrls,
    englishOnlyZodLocales,
  ]),
]);
await rm(blobPath, { force: true });
await rm(`${blobPath}.node`, { force: true });
const { metafile } = await build({
  entryPoints: [join(packageDir, 'dist', 'cli', 'snapshot-main.js')],
  outfile: bundlePath,
  ...commonjsBundle,
  metafile: true,
  plugins: [
    telemetryOnUse,
    packagesOnUse,
    ownModuleUrls,
    mcpOnUse,
    lazyBuiltins(UNSNAPSHOTTABLE),
    emptyOptionalModules,
    englishOnlyZodLocales,
  ],
});

/**
 * The build info of each of our packages the bundle holds (tsc rewrites it whenever it emits
 * there): the snapshot records their digest, and runs the modules instead when the compiled CLI
 * has changed since (src/cli/snapshot-inputs.ts).
 */
const snapshotInputs = [
  ...new Set(
    Object.keys(metafile.inputs)
      // Files only: not the plugins' modules (`namespace:path`).
      .filter((input) => !/^[a-z-]+:/.test(input))
      .map((input) => /^(.*[\\/](?:libs|agent)[\\/][^\\/]+)[\\/]dist[\\/]/.exec(resolve(input))?.[1])
      .filter((dir) => dir !== undefined),
  ),
]
  .map((dir) => relative(packageDir, join(dir, 'dist', '.tsbuildinfo')))
  .sort();

/** The build info files (snapshotInputs' form) of our packages a bundle's metafile names. */
const inputsOf = (inputs) =>
  [
    ...new Set(
      Object.keys(inputs)
        .filter((input) => !/^[a-z-]+:/.test(input))
        .map((input) => /^(.*[\\/](?:libs|agent)[\\/][^\\/]+)[\\/]dist[\\/]/.exec(resolve(input))?.[1])
        .filter((dir) => dir !== undefined),
    ),
  ]
    .map((dir) => relative(packageDir, join(dir, 'dist', '.tsbuildinfo')))
    .sort();

/**
 * The lean `exec` (issue 33: exec ≤ 1.5× `node -e 0`): a plain bundle of src/cli/lean-exec, with
 * the sandbox-exec script and the digest of what it was built from as constants (it checks that
 * digest at start, as the snapshot does, and runs the full CLI when it changed). What it falls
 * back on for an odd record, libs/wire's and libs/bus' schemas, is a bundle of its own.
 */
const leanBundlePath = join(outDir, 'sandstream-exec.cjs');
{
  const { busLua } = await import(pathToFileURL(join(packageDir, '..', 'bus', 'dist', 'index.js')).href);
  const script = busLua.load('sandbox-exec');
  const leanEntry = join(packageDir, 'dist', 'cli', 'lean-exec', 'lean-exec-main.js');
  // First pass for the inputs (the digest is a constant of the bundle itself).
  const probe = await build({ entryPoints: [leanEntry], ...node20CommonJs, write: false, metafile: true });
  const leanInputs = inputsOf(probe.metafile.inputs);
  const digest = createHash('sha1');
  const stats = [];
  for (const file of leanInputs) {
    digest.update(file);
    digest.update(await readFile(resolve(packageDir, file)));
    const { size, mtimeMs } = await stat(resolve(packageDir, file));
    stats.push([size, mtimeMs]);
  }
  await build({
    entryPoints: [leanEntry],
    outfile: leanBundlePath,
    ...node20CommonJs,
    define: {
      __LEAN_EXEC_LUA__: JSON.stringify(script.source),
      __LEAN_EXEC_LUA_SHA__: JSON.stringify(script.sha),
      __LEAN_EXEC_INPUTS__: JSON.stringify(leanInputs),
      __LEAN_EXEC_BUILT_FROM__: JSON.stringify(digest.digest('hex')),
      __LEAN_EXEC_INPUT_STATS__: JSON.stringify(stats),
    },
  });
  await sideBundle(
    join(packageDir, 'dist', 'cli', 'lean-exec', 'full-decoders.js'),
    join(outDir, 'sandstream-exec-full.cjs'),
    [telemetryOnUse, packagesOnUse, ownModuleUrls, englishOnlyZodLocales],
  );
}

try {
  execFileSync(process.execPath, ['--snapshot-blob', blobPath, '--build-snapshot', bundlePath], {
    stdio: 'pipe',
    cwd: outDir,
    env: { ...process.env, SANDSTREAM_CLI_SNAPSHOT_INPUTS: JSON.stringify(snapshotInputs) },
  });
  await writeFile(`${blobPath}.node`, `${realpathSync(process.execPath)}\n`);
} catch (err) {
  await rm(blobPath, { force: true });
  process.stderr.write(
    `[build-cli] no start-up snapshot (the CLI runs from the bundle, slower to start): ${err.message}\n${err.stderr?.toString() ?? ''}`,
  );
}
