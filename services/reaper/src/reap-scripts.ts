import { busLua, luaDir } from '@sandstream/bus';

/** The reaper's check-and-delete scripts (`src/lua/`); each re-checks its condition atomically. */
const lua = busLua.extend(luaDir(import.meta.url));

export const DELETE_FINISHED_JOB = lua.load('reaper-delete-finished-job');
export const DELETE_ORPHAN_KEY = lua.load('reaper-delete-orphan-key');
