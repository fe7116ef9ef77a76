import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LuaScript, type LuaSource } from './lua-script.js';

/**
 * Loads Lua scripts from `.lua` files, BullMQ style: a script is `<name>-<numKeys>.lua`, and a
 * line `--- @include "<include>"` is replaced by the include's source (each include once per
 * script, includes may include others). Includes are `includes/<include>.lua` in any directory of
 * the search path, or generated from TypeScript: constants that TypeScript owns (the job states,
 * the job record's field names) reach Lua from their one definition instead of being retyped.
 *
 * Nothing is read until a script is first run (LuaScript reads its source then, once): `load`
 * only names the script, so modules can define their scripts at the top level without reading
 * files on import.
 *
 * Directories are read relative to the package's `src/` (see luaDir), so the same files serve
 * the vitest run of the sources and the compiled `dist/` without a copy step that a plain
 * `tsc -b` (the Docker build, `npm run typecheck`) would skip.
 */
export interface LuaLoaderOptions {
  /** Searched in order for scripts and includes. */
  dirs: readonly URL[];
  /** Includes generated from TypeScript, by include name. */
  generated?: Readonly<Record<string, () => string>>;
}

const INCLUDE = /^--- @include "([^"]+)"\s*$/;
const SCRIPT_FILE = /^(.+)-(\d+)\.lua$/;

/**
 * Script files, include files and script directories read by every loader of this process, for
 * the test that importing reads none and that a script is read once.
 */
let filesRead = 0;

export function luaFilesRead(): number {
  return filesRead;
}

function readLuaFile(file: URL): string {
  filesRead++;
  return readFileSync(file, 'utf8');
}

function listLuaDir(path: string): string[] {
  filesRead++;
  return readdirSync(path);
}

export class LuaLoader {
  /** One script object per name: two modules loading the same script share one read. */
  private readonly scripts = new Map<string, LuaScript>();

  constructor(private readonly options: LuaLoaderOptions) {}

  /** A loader that searches `dir` first, then everything this one searches. */
  extend(dir: URL): LuaLoader {
    return new LuaLoader({ ...this.options, dirs: [dir, ...this.options.dirs] });
  }

  /** The script `<name>-<numKeys>.lua` of the first directory that has one, read on first use. */
  load(name: string): LuaScript {
    let script = this.scripts.get(name);
    if (!script) {
      script = new LuaScript(name, () => this.read(name));
      this.scripts.set(name, script);
    }
    return script;
  }

  private read(name: string): LuaSource {
    for (const dir of this.options.dirs) {
      const path = fileURLToPath(dir);
      if (!existsSync(path)) continue;
      for (const file of listLuaDir(path)) {
        const match = SCRIPT_FILE.exec(file);
        if (match?.[1] !== name) continue;
        const source = this.expand(readLuaFile(new URL(file, dir)), new Set(), file);
        return { source, numberOfKeys: Number(match[2]) };
      }
    }
    throw new Error(`Lua script ${name} not found (looked for ${name}-<numKeys>.lua in ${this.where()})`);
  }

  private expand(source: string, included: Set<string>, from: string): string {
    return source
      .split('\n')
      .map((line) => {
        const match = INCLUDE.exec(line);
        if (!match) return line;
        const include = match[1] as string;
        if (included.has(include)) return `-- (${include} already included)`;
        included.add(include);
        return this.expand(this.includeSource(include, from), included, include);
      })
      .join('\n');
  }

  private includeSource(include: string, from: string): string {
    const generated = this.options.generated?.[include];
    if (generated) return generated();
    for (const dir of this.options.dirs) {
      const file = new URL(`includes/${include}.lua`, dir);
      if (existsSync(file)) return readLuaFile(file);
    }
    throw new Error(`Lua include "${include}" (in ${from}) not found in ${this.where()}`);
  }

  private where(): string {
    return this.options.dirs.map((d) => fileURLToPath(d)).join(', ');
  }
}

/**
 * The `src/lua/` directory of the package whose module passes its import.meta.url. Works from
 * `src/x.ts` (vitest) and from `dist/x.js` alike, for modules at the package's top level.
 */
export function luaDir(moduleUrl: string): URL {
  return new URL('../src/lua/', moduleUrl);
}
