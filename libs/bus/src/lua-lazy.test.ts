import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { connectTestRedis } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
// The whole package: job-store, warm-pool-store, slot-leases, sandbox-commands, short-lock… all
// define their scripts at the top level.
import * as bus from './index.js';

// Before any test runs: what importing the package read.
const readOnImport = bus.luaFilesRead();

const root = mkdtempSync(join(tmpdir(), 'lua-lazy-'));
const redis = connectTestRedis();

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  redis.disconnect();
});

describe('Lua loaded lazily', () => {
  it('importing the package reads no script file', () => {
    expect(readOnImport).toBe(0);
    expect(bus.busLua.load('job-transition').loaded).toBe(false);
    expect(bus.busLua.load('lock-release').loaded).toBe(false);
  });

  it('reads a script on first use, once per process, however many modules load it', async () => {
    mkdirSync(join(root, 'includes'), { recursive: true });
    writeFileSync(join(root, 'includes', 'one.lua'), 'local one = 1');
    writeFileSync(join(root, 'add-1.lua'), '--- @include "one"\nreturn tonumber(ARGV[1]) + one');
    const loader = new bus.LuaLoader({ dirs: [pathToFileURL(`${root}/`)] });
    const before = bus.luaFilesRead();
    // Two modules defining the same script get one object.
    const a = loader.load('add');
    const b = loader.load('add');
    expect(b).toBe(a);
    expect(bus.luaFilesRead()).toBe(before);
    expect(await a.run(redis, ['k'], [41])).toBe(42);
    const afterFirst = bus.luaFilesRead();
    expect(afterFirst).toBeGreaterThan(before);
    expect(await b.run(redis, ['k'], [1])).toBe(2);
    expect(a.numberOfKeys).toBe(1);
    expect(bus.luaFilesRead()).toBe(afterFirst);
  });
});
