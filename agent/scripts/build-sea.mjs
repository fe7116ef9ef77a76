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
 *                              plus sandstream-spawner, sandstream-sea-release.node and
 *                              sandstream-source-release.node (native/: build-native.mjs)
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
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import postject from 'postject';
// Shared with the CLI's snapshot build (libs/client/scripts/build-cli.mjs).
import {
  emptyOptionalModules,
  englishOnlyZodLocales,
  lazyBuiltins,
  node20CommonJs,
} from '../../scripts/node20-bundle.mjs';
// tsc output (`build` runs tsc -b first): the one copy routine --inject uses.
import { copyInSmallWrites } from '../dist/inject.js';
import {
  buildSeaRelease,
  buildSourceRelease,
  buildSpawner,
  SEA_RELEASE_NAME,
  SOURCE_RELEASE_NAME,
  SPAWNER_NAME,
} from './build-native.mjs';
import { paddingToAlign, withoutCodeCache, withPaddedCodePath } from './sea-blob.mjs';

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

async function bundle(entryPath, name) {
  if (!(await exists(entryPath))) {
    throw new Error(`entry ${relative(process.cwd(), entryPath)} does not exist`);
  }
  const bundlePath = join(workDir, name);
  await build({
    entryPoints: [entryPath],
    outfile: bundlePath,
    ...node20CommonJs,
    // ESM sources may read import.meta.url; in the CommonJS bundle it is this file's URL, in the
    // single executable the executable's (what Node gives as __filename there). Read when used,
    // not at load: a snapshot's load happened at build time, in another place.
    banner: {
      js: 'var __sandstreamImportMeta = { get url() { let sea = false; try { sea = require("node:sea").isSea(); } catch {} return require("node:url").pathToFileURL(sea ? process.execPath : __filename).href; } };',
    },
    define: { 'import.meta.url': '__sandstreamImportMeta.url' },
    // tls: ioredis and the wire's raw connection import it statically and only call tls.connect.
    plugins: [emptyOptionalModules, lazyBuiltins(['tls']), englishOnlyZodLocales],
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

/**
 * The snapshot's entry: a few lines that read the bundle, compile it as Node would have run it as
 * the entry itself (a function of require, __filename, __dirname), and keep the very string V8
 * compiled it from, under a registry symbol. The bundle's source is the largest object of the
 * agent's heap (~640 KB, a copy of bytes the executable holds anyway); kept reachable, the running
 * agent can hand it to sandstream-source-release.node, which points V8 at the executable's bytes
 * instead (agent/native/source-release.cc). The bundle is ASCII (esbuild escapes the rest), so
 * latin1 reads it as the one-byte string V8 keeps.
 */
async function sourceKeepingLoader(bundlePath) {
  const loaderPath = join(dirname(bundlePath), 'agent-snapshot-loader.cjs');
  const source = await readFile(bundlePath);
  if (source.some((byte) => byte > 0x7f)) throw new Error(`${bundlePath} is not ASCII`);
  await writeFile(
    loaderPath,
    `'use strict';
const source = require('node:fs').readFileSync(${JSON.stringify(bundlePath)}, 'latin1');
globalThis[Symbol.for('sandstream.agent.source')] = source;
require('node:vm').compileFunction(source, ['require', '__filename', '__dirname'], { filename: __filename })(require, __filename, __dirname);
`,
  );
  return loaderPath;
}

function hasTool(name) {
  try {
    execFileSync(name, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * postject's ELF writer (LIEF, on console.warn) names the note section it adds for the blob in no
 * string table and warns "Can't find string offset for section name '.note'" on every build. The
 * section's name is never read (Node finds the blob through the note segment), so that one line is
 * dropped; any other warning shows.
 */
async function withoutNoteNameWarnings(fn) {
  const warn = console.warn;
  console.warn = (...args) => {
    if (!/^warning: Can't find string offset for section name '\.note[.\w]*'$/.test(String(args[0])))
      warn(...args);
  };
  try {
    return await fn();
  } finally {
    console.warn = warn;
  }
}

async function makeExecutable(blob) {
  const temp = `${out}.partial`;
  await copyFile(process.execPath, temp);
  await chmod(temp, 0o755);
  // Debian's node carries full debug info; it is useless inside a sandbox and costs megabytes.
  // strip warns about Node's unusual note sections; the output is shown only if it fails.
  // .gnu.build.attributes: the compiler's build notes (annobin), read by no one at run time;
  // postject's ELF writer rebuilt each of its notes as a section it could not name, and said so
  // eight times per build ("Can't find string offset for section name '.note.100'", issue 33).
  if (!values['no-strip'] && hasTool('strip'))
    execFileSync('strip', ['--strip-debug', '--remove-section=.gnu.build.attributes', temp], {
      stdio: 'pipe',
    });
  const t = Date.now();
  await withoutNoteNameWarnings(() =>
    postject.inject(temp, 'NODE_SEA_BLOB', blob, { sentinelFuse: SEA_FUSE }),
  );
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

/**
 * The snapshot executable, its blob rewritten for the agent's idle memory (sea-blob.mjs): without
 * the builtins' code cache, and its V8 startup data 16 bytes past a page boundary of the file, as
 * sandstream-sea-release.node needs to map the file over the copy Node makes of it. Where postject
 * puts the blob is only known once it has, so a misaligned first try is padded and written again.
 */
async function makeSnapshotExecutable(prepared) {
  let blob = withoutCodeCache(prepared);
  for (let attempt = 0; attempt < 3; attempt++) {
    await makeExecutable(blob);
    const at = (await readFile(out)).indexOf(blob.subarray(0, 4096));
    if (at < 0) throw new Error(`the blob is not in ${out}`);
    const padding = paddingToAlign(blob, at);
    if (padding === 0) return;
    log(`V8 startup data ${padding} bytes short of its page offset: code path padded, written again`);
    blob = withPaddedCodePath(blob, padding);
  }
  throw new Error('could not place the V8 startup data at its page offset in the executable');
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
    ? await timed('snapshot bundle', async () =>
        sourceKeepingLoader(await bundle(snapshotEntry, 'agent-snapshot.cjs')),
      )
    : bundlePath;
  const blobPath = await timed('blob', () => makeBlob(seaMain, snapshotEntry !== null));
  const blob = await readFile(blobPath);
  await timed('executable', () => (snapshotEntry ? makeSnapshotExecutable(blob) : makeExecutable(blob)));
  const libs = await timed('libs', () => copyRuntime(out));
  // After copyRuntime, which empties the directory: the helper lives beside the libraries.
  const [, , sourceRelease] = await timed('native', () =>
    Promise.all([
      buildSpawner(join(runtimeLib, SPAWNER_NAME)),
      buildSeaRelease(join(runtimeLib, SEA_RELEASE_NAME)),
      // Optional: the agent runs without it (the bundle's source stays in its heap, ~0.6 MB
      // more per agent), so a machine without a C++ compiler or Node's headers still builds.
      buildSourceRelease(join(runtimeLib, SOURCE_RELEASE_NAME)).catch((err) => {
        log(`warning: ${err instanceof Error ? err.message : String(err)}; the agent runs without it`);
        return undefined;
      }),
    ]),
  );
  libs.push(SPAWNER_NAME, SEA_RELEASE_NAME, ...(sourceRelease ? [SOURCE_RELEASE_NAME] : []));
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
