import { jobLayoutLua } from './job-layout.js';
import { LuaLoader, luaDir } from './lua-loader.js';

/**
 * The Lua scripts and includes of libs/bus (`src/lua/`), with the generated `job-layout`
 * include. Services load their own scripts through `busLua.extend(luaDir(import.meta.url))`,
 * so their scripts can include the job record's helpers.
 */
export const busLua = new LuaLoader({
  dirs: [luaDir(import.meta.url)],
  generated: { 'job-layout': jobLayoutLua },
});
