import { createKeySpace, DispatchKeys, jobFootprint, luaFilesRead } from '@sandstream/bus';
import { describe, expect, it } from 'vitest';
import { DELETE_FINISHED_JOB, DELETE_ORPHAN_KEY } from './reap-scripts.js';

// Before any test runs: what importing the reaper's scripts read.
const readOnImport = luaFilesRead();

describe("the reaper's Lua scripts", () => {
  it('are not read when their module is imported, only on first use', () => {
    expect(readOnImport).toBe(0);
    expect(DELETE_FINISHED_JOB.loaded).toBe(false);
    expect(DELETE_ORPHAN_KEY.loaded).toBe(false);
    // First use reads them (and finds them: the names and key counts in the file names hold; the
    // finished-job delete takes the job's footprint, however many keys it names).
    const keys = createKeySpace('reap-scripts');
    expect(DELETE_FINISHED_JOB.numberOfKeys).toBe(
      jobFootprint(keys, new DispatchKeys(keys), 'job').keys.length,
    );
    expect(DELETE_ORPHAN_KEY.numberOfKeys).toBe(3);
    expect(luaFilesRead()).toBeGreaterThan(0);
  });
});
