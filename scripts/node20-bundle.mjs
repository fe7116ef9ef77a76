/**
 * What the two one-file builds share: the agent's single executable (agent/scripts/build-sea.mjs)
 * and the CLI's start-up snapshot (libs/client/scripts/build-cli.mjs). Both bundle with esbuild
 * into one CommonJS file for Node 20 that a V8 start-up snapshot is then made of, and both met the
 * same three problems; the fixes live here once. Plain esbuild plugin objects and options: this
 * module imports nothing, so each package's own esbuild does the building.
 */
import { createRequire } from 'node:module';
import { dirname, join, sep } from 'node:path';

const require = createRequire(import.meta.url);

/**
 * The esbuild options both builds use: CommonJS for Node 20 (a SEA and a snapshot entry run
 * CommonJS only), whitespace-minified. Identifiers keep their names: stack traces from the field
 * stay readable, and ioredis' errors name themselves by their class (`constructor.name`).
 */
export const node20CommonJs = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  minifyWhitespace: true,
  legalComments: 'none',
  logLevel: 'warning',
};

/**
 * `debug` (used by ioredis) tries `require('supports-color')` inside a try/catch. The package is
 * not installed, so esbuild would leave the require in place, and inside a SEA every non-builtin
 * require prints a warning on each start. An empty module keeps the same behaviour (no colour
 * support) without the noise.
 */
export const emptyOptionalModules = {
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
 *   executable or a start-up snapshot (Node 20) that rejects (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING:
 *   there is no module loader there). It becomes a require made on first use.
 * - `proxied` (always `tls`): builtins whose bindings a Node 20 snapshot cannot hold ("Unknown
 *   external reference") or that Node warns it has not verified there. Each is a stand-in whose
 *   every export reads the real module, loaded on the first read; a plain-TCP process never
 *   loads tls at all.
 */
export function lazyBuiltins(proxied) {
  const names = new Set(proxied);
  return {
    name: 'lazy-builtins',
    setup(b) {
      b.onResolve({ filter: /^(node:)?[a-z_/]+$/ }, (args) => {
        // The stand-ins' own requires of the real modules are left to Node.
        if (args.namespace === 'lazy-builtin') return { path: args.path, external: true };
        if (args.kind === 'dynamic-import' && args.path.startsWith('node:'))
          return { path: args.path, namespace: 'lazy-builtin', pluginData: 'require' };
        const bare = args.path.replace(/^node:/, '');
        if (names.has(bare)) return { path: `node:${bare}`, namespace: 'lazy-builtin', pluginData: 'proxy' };
        return undefined;
      });
      b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => {
        const real = `require(${JSON.stringify(args.path)})`;
        if (args.pluginData !== 'proxy') return { contents: `module.exports = ${real};`, loader: 'js' };
        // A getter per export, the names read here at build time: esbuild's ESM interop copies a
        // module's own keys when it is imported (a named import such as http's Agent reads that
        // copy), and must find them without loading the module. A Proxy with only a `get` trap
        // has no keys to copy: `new Agent()` then threw "not a constructor" (every CLI --url command).
        const names = Object.keys(require(args.path)).filter((name) => name !== 'default');
        return {
          contents: `const names = ${JSON.stringify(names)}; const stub = {};
for (const name of names) Object.defineProperty(stub, name, { enumerable: true, get: () => ${real}[name] });
module.exports = stub;`,
          loader: 'js',
        };
      });
    },
  };
}

/**
 * zod's index re-exports every one of its ~40 message locales (~300 KB of source), and only the
 * English one is ever used (zod configures it itself; nothing switches). Every start paid for the
 * rest: parsed source, and in a snapshot a larger heap.
 */
export const englishOnlyZodLocales = {
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
