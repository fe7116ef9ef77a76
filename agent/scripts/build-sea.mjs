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
 *                              plus sandstream-spawner and sandstream-sea-release.node (native/: build-native.mjs)
 *
 * Steps: esbuild bundles the entry into one CommonJS file (Node 20's SEA only runs CommonJS and
 * can only `require` builtins), `node --experimental-sea-config` turns it into a blob, and
 * postject writes the blob into a copy of this node binary and flips the NODE_SEA_FUSE sentinel.
 *
 * The executable's blob is a V8 startup snapshot (`useSnapshot`) of src/snapshot-main.ts: the
 * bundle's modules are loaded and initialised once, here, and every start deserialises that heap
 * instead (docs/benchmarks.md, "Fast start, part 1"). `--no-snapshot` builds it from --entry
 * with a code cache instead (what probe-entry.ts needs: it is not a snapshot entry).
 *
 * Usage (cwd-independent): node agent/scripts/build-sea.mjs [--entry src/main.ts]
 *   [--snapshot-entry src/snapshot-main.ts] [--no-snapshot] [--out dist/sandstream-agent] [--no-strip]
 * Paths are relative to the agent package.
 */
import { execFileSync } from 'node:child_process';
import { chmod, copyFile, mkdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import postject from 'postject';
// tsc output (`build` runs tsc -b first): the one copy routine --inject uses.
import { copyInSmallWrites } from '../dist/inject.js';
import { buildSeaRelease, buildSpawner, SEA_RELEASE_NAME, SPAWNER_NAME } from './build-native.mjs';

// The sentinel Node's SEA support looks for; postject flips its trailing ":0" to ":1".
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const LOADER_NAME = 'ld-linux-x86-64.so.2';

const agentDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    entry: { type: 'string', default: 'src/main.ts' },
    'snapshot-entry': { type: 'string', default: 'src/snapshot-main.ts' },
    'no-snapshot': { type: 'boolean', default: false },
    out: { type: 'string', default: 'dist/sandstream-agent' },
    'no-strip': { type: 'boolean', default: false },
  },
});
const entry = resolve(agentDir, values.entry);
const snapshotEntry = values['no-snapshot'] ? null : resolve(agentDir, values['snapshot-entry']);
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

/**
 * Builtins loaded on first use, as the sources mean them to be:
 *
 * - `import('node:…')`: esbuild keeps a dynamic import of a builtin as it is, and in a single
 *   executable (Node 20) that rejects with ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING: the step spans'
 *   exporter could never load node:http. Here it becomes a require made on first use.
 * - `node:tls`, imported statically by ioredis and the wire's raw connection, which only call
 *   tls.connect: loading it costs a plain-TCP agent CPU on every start, and a Node 20 startup
 *   snapshot cannot hold its bindings ("Unknown external reference"). Its stand-in forwards every
 *   property read to the real module.
 */
const lazyBuiltins = {
  name: 'lazy-builtins',
  setup(b) {
    b.onResolve({ filter: /^(node:)?[a-z_/]+$/ }, (args) => {
      // The stand-ins' own requires of the real modules are left to Node.
      if (args.namespace === 'lazy-builtin') return { path: args.path, external: true };
      if (args.kind === 'dynamic-import' && args.path.startsWith('node:'))
        return { path: args.path, namespace: 'lazy-builtin', pluginData: 'require' };
      if (/^(node:)?tls$/.test(args.path))
        return { path: 'node:tls', namespace: 'lazy-builtin', pluginData: 'proxy' };
      return undefined;
    });
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => {
      const real = `require(${JSON.stringify(args.path)})`;
      return {
        contents:
          args.pluginData === 'proxy'
            ? `module.exports = new Proxy({}, { get: (_, key) => ${real}[key] });`
            : `module.exports = ${real};`,
        loader: 'js',
      };
    });
  },
};

/**
 * zod's index re-exports every one of its ~40 message locales (~300 KB, close to a third of the
 * bundle), and only the English one is ever used (zod configures it itself; the agent never
 * switches). Every start paid for the rest: parsed source, and in the snapshot a larger heap.
 */
const englishOnlyZodLocales = {
  name: 'english-only-zod-locales',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      args.importer.includes(`${sep}node_modules${sep}zod${sep}`)
        ? { path: join(args.resolveDir, '..', 'locales', 'index.js'), namespace: 'zod-locales' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: dirname(args.path),
      loader: 'js',
    }));
  },
};

async function bundle(entryPath, name) {
  if (!(await exists(entryPath))) {
    throw new Error(`entry ${relative(process.cwd(), entryPath)} does not exist`);
  }
  const bundlePath = join(workDir, name);
  await build({
    entryPoints: [entryPath],
    outfile: bundlePath,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    // Keeps names readable in stack traces from the field; whitespace is all that is worth removing.
    minifyWhitespace: true,
    legalComments: 'none',
    logLevel: 'warning',
    // ESM sources may read import.meta.url; in the CommonJS bundle it is this file's URL, in the
    // single executable the executable's (what Node gives as __filename there). Read when used,
    // not at load: a snapshot's load happened at build time, in another place.
    banner: {
      js: 'var __sandstreamImportMeta = { get url() { let sea = false; try { sea = require("node:sea").isSea(); } catch {} return require("node:url").pathToFileURL(sea ? process.execPath : __filename).href; } };',
    },
    define: { 'import.meta.url': '__sandstreamImportMeta.url' },
    plugins: [emptyOptionalModules, lazyBuiltins, englishOnlyZodLocales],
  });
  return bundlePath;
}

async function makeBlob(bundlePath, snapshot) {
  const blobPath = join(workDir, 'sea-prep.blob');
  const configPath = join(workDir, 'sea-config.json');
  const config = {
    main: bundlePath,
    output: blobPath,
    disableExperimentalSEAWarning: true,
    // The agent's cold start matters (a sandbox waits for it): a startup snapshot of the loaded
    // agent, or at least V8's code cache for the bundle (ignored by Node with a snapshot).
    ...(snapshot ? { useSnapshot: true } : { useCodeCache: true }),
  };
  await writeFile(configPath, `${JSON.stringify(config, null, 2)}\n`);
  try {
    execFileSync(process.execPath, ['--experimental-sea-config', configPath], { stdio: 'pipe' });
  } catch (err) {
    // Node warns on stderr for every builtin it has not verified in snapshots; show it only on failure.
    throw new Error(`${err.message}\n${err.stderr?.toString() ?? ''}`);
  }
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
  // postject writes the file in large writes; rewritten in small ones, it maps ~10 MB less in a
  // process that runs it while it is still in the page cache (agent/src/inject.ts).
  const rewritten = `${out}.rewritten`;
  await rm(rewritten, { force: true });
  copyInSmallWrites(temp, rewritten);
  await rm(temp);
  await chmod(rewritten, 0o755);
  await rename(rewritten, out);
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
  const bundlePath = await timed('bundle', () => bundle(entry, 'agent.cjs'));
  await copyFile(bundlePath, `${out}.cjs`);
  const seaMain = snapshotEntry
    ? await timed('snapshot bundle', () => bundle(snapshotEntry, 'agent-snapshot.cjs'))
    : bundlePath;
  const blobPath = await timed('blob', () => makeBlob(seaMain, snapshotEntry !== null));
  await timed('executable', () => makeExecutable(blobPath));
  const libs = await timed('libs', () => copyRuntime(out));
  // After copyRuntime, which empties the directory: the helper lives beside the libraries.
  await timed('native', () =>
    Promise.all([
      buildSpawner(join(runtimeLib, SPAWNER_NAME)),
      buildSeaRelease(join(runtimeLib, SEA_RELEASE_NAME)),
    ]),
  );
  libs.push(SPAWNER_NAME, SEA_RELEASE_NAME);
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
