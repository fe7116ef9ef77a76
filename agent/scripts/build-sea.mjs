#!/usr/bin/env node
/**
 * Builds the agent as ONE executable (Node single-executable application) plus the runtime it
 * needs, so it can be injected into any image:
 *
 *   dist/sandstream-agent      node + the bundled agent, injected as the NODE_SEA_BLOB resource
 *   dist/sandstream-agent.cjs  the same bundle for an existing node (`node dist/sandstream-agent.cjs`:
 *                              the in-process backend and the package's bin); one file loads in
 *                              less memory than the compiled modules (docs/benchmarks.md)
 *   dist/runtime/lib/          ld-linux-x86-64.so.2 and every library `ldd` says the binary needs,
 *                              plus sandstream-spawner (native/spawner.c, static: build-spawner.mjs)
 *
 * Steps: esbuild bundles the entry into one CommonJS file (Node 20's SEA only runs CommonJS and
 * can only `require` builtins), `node --experimental-sea-config` turns it into a blob, and
 * postject writes the blob into a copy of this node binary and flips the NODE_SEA_FUSE sentinel.
 *
 * Usage (cwd-independent): node agent/scripts/build-sea.mjs [--entry src/main.ts] [--out dist/sandstream-agent] [--no-strip]
 * Paths are relative to the agent package.
 */
import { execFileSync } from 'node:child_process';
import { chmod, copyFile, mkdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import postject from 'postject';
import { buildSpawner, SPAWNER_NAME } from './build-spawner.mjs';

// The sentinel Node's SEA support looks for; postject flips its trailing ":0" to ":1".
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const LOADER_NAME = 'ld-linux-x86-64.so.2';

const agentDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    entry: { type: 'string', default: 'src/main.ts' },
    out: { type: 'string', default: 'dist/sandstream-agent' },
    'no-strip': { type: 'boolean', default: false },
  },
});
const entry = resolve(agentDir, values.entry);
const out = resolve(agentDir, values.out);
const outDir = dirname(out);
const workDir = join(outDir, `${basename(out)}.sea`);
const runtimeLib = join(outDir, 'runtime', 'lib');
const log = (msg) => process.stderr.write(`[build-sea] ${msg}\n`);

async function exists(path) {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * `debug` (used by ioredis) tries `require('supports-color')` inside a try/catch. The package is
 * not installed, so esbuild leaves the require in place, and inside a SEA every non-builtin
 * require prints a warning on each start. Bundling an empty module keeps the same behaviour
 * (no colour support) without the noise.
 */
const emptyOptionalModules = {
  name: 'empty-optional-modules',
  setup(b) {
    b.onResolve({ filter: /^supports-color$/ }, (args) => ({ path: args.path, namespace: 'empty-module' }));
    b.onLoad({ filter: /.*/, namespace: 'empty-module' }, () => ({
      contents: 'module.exports = {};',
      loader: 'js',
    }));
  },
};

async function bundle() {
  if (!(await exists(entry))) {
    throw new Error(`entry ${relative(process.cwd(), entry)} does not exist (pass --entry <file>)`);
  }
  const bundlePath = join(workDir, 'agent.cjs');
  await build({
    entryPoints: [entry],
    outfile: bundlePath,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    // Keeps names readable in stack traces from the field; whitespace is all that is worth removing.
    minifyWhitespace: true,
    legalComments: 'none',
    logLevel: 'warning',
    // ESM sources may read import.meta.url; in the CommonJS bundle it is this file's URL.
    banner: { js: 'var __sandstreamImportMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
    define: { 'import.meta.url': '__sandstreamImportMetaUrl' },
    plugins: [emptyOptionalModules],
  });
  return bundlePath;
}

async function makeBlob(bundlePath) {
  const blobPath = join(workDir, 'sea-prep.blob');
  const configPath = join(workDir, 'sea-config.json');
  const config = {
    main: bundlePath,
    output: blobPath,
    disableExperimentalSEAWarning: true,
    // V8 code cache for the bundle: the agent's cold start matters (a sandbox waits for it).
    useCodeCache: true,
  };
  await writeFile(configPath, `${JSON.stringify(config, null, 2)}\n`);
  execFileSync(process.execPath, ['--experimental-sea-config', configPath], { stdio: 'pipe' });
  return blobPath;
}

function hasTool(name) {
  try {
    execFileSync(name, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function makeExecutable(blobPath) {
  const temp = `${out}.partial`;
  await copyFile(process.execPath, temp);
  await chmod(temp, 0o755);
  // Debian's node carries full debug info; it is useless inside a sandbox and costs megabytes.
  // strip warns about Node's unusual note sections; the output is shown only if it fails.
  if (!values['no-strip'] && hasTool('strip'))
    execFileSync('strip', ['--strip-debug', temp], { stdio: 'pipe' });
  const blob = await readFile(blobPath);
  const t = Date.now();
  await postject.inject(temp, 'NODE_SEA_BLOB', blob, { sentinelFuse: SEA_FUSE });
  log(`postject ${((Date.now() - t) / 1000).toFixed(1)}s`);
  await rename(temp, out);
}

/** Parses `ldd` output into [soname-or-basename, resolved path] pairs, loader included. */
function neededLibraries(binary) {
  const text = execFileSync('ldd', [binary], { encoding: 'utf8' });
  const libs = [];
  for (const line of text.split('\n')) {
    const arrow = line.match(/^\s*(\S+)\s+=>\s+(\/\S+)\s+\(/);
    if (arrow) {
      libs.push([arrow[1], arrow[2]]);
      continue;
    }
    const bare = line.match(/^\s*(\/\S+)\s+\(/);
    if (bare) libs.push([basename(bare[1]), bare[1]]);
    if (/not found/.test(line)) throw new Error(`ldd ${binary}: ${line.trim()}`);
  }
  if (!libs.some(([name]) => name === LOADER_NAME)) {
    throw new Error(`ldd ${binary} names no ${LOADER_NAME}; only x86-64 glibc builds are supported`);
  }
  return libs;
}

async function copyRuntime(binary) {
  await rm(runtimeLib, { recursive: true, force: true });
  await mkdir(runtimeLib, { recursive: true });
  const libs = neededLibraries(binary);
  for (const [name, path] of libs) {
    // realpath: the host's names are symlink chains; the runtime must hold the real files.
    await copyFile(await realpath(path), join(runtimeLib, name));
    await chmod(join(runtimeLib, name), 0o755);
  }
  return libs.map(([name]) => name);
}

async function main() {
  const started = Date.now();
  const timings = [];
  const timed = async (name, fn) => {
    const t = Date.now();
    const result = await fn();
    timings.push(`${name} ${((Date.now() - t) / 1000).toFixed(1)}s`);
    return result;
  };
  await rm(workDir, { recursive: true, force: true });
  await mkdir(workDir, { recursive: true });
  const bundlePath = await timed('bundle', bundle);
  await copyFile(bundlePath, `${out}.cjs`);
  const blobPath = await timed('blob', () => makeBlob(bundlePath));
  await timed('executable', () => makeExecutable(blobPath));
  const libs = await timed('libs', () => copyRuntime(out));
  // After copyRuntime, which empties the directory: the helper lives beside the libraries.
  await timed('spawner', () => buildSpawner(join(runtimeLib, SPAWNER_NAME)));
  libs.push(SPAWNER_NAME);
  const size = (await stat(out)).size;
  log(
    `${relative(process.cwd(), out)} (${(size / 1024 / 1024).toFixed(1)} MiB) + ` +
      `${relative(process.cwd(), runtimeLib)}/{${libs.join(',')}} in ${Date.now() - started} ms (${timings.join(', ')})`,
  );
}

main().catch((err) => {
  log(`failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
