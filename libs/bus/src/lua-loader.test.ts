import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { connectTestRedis } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { busLua } from './bus-lua.js';
import { TERMINAL_STATES } from './job-state.js';
import { LuaLoader } from './lua-loader.js';

const root = mkdtempSync(join(tmpdir(), 'lua-loader-'));
const dir = (name: string) => {
  const path = join(root, name);
  mkdirSync(join(path, 'includes'), { recursive: true });
  return { path, url: pathToFileURL(`${path}/`) };
};
const redis = connectTestRedis();

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  redis.disconnect();
});

describe('Lua loader', () => {
  it('reads the key count from the file name, inlines each include once, and searches extended dirs first', async () => {
    const base = dir('base');
    const own = dir('own');
    writeFileSync(join(base.path, 'includes', 'twice.lua'), 'local function twice(x) return x * 2 end');
    writeFileSync(join(own.path, 'includes', 'both.lua'), '--- @include "twice"\nlocal n = 1');
    writeFileSync(
      join(own.path, 'sum-1.lua'),
      '--- @include "both"\n--- @include "twice"\nreturn twice(tonumber(ARGV[1])) + n + #KEYS',
    );
    const loader = new LuaLoader({ dirs: [base.url] }).extend(own.url);
    const script = loader.load('sum');
    expect(script.numberOfKeys).toBe(1);
    expect(script.source.match(/local function twice/g)).toHaveLength(1);
    expect(await script.run(redis, ['k'], [20])).toBe(42);
    await expect(script.run(redis, [], [20])).rejects.toThrow(/takes 1 keys, got 0/);
  });

  it('names a missing script or include', () => {
    const d = dir('broken');
    writeFileSync(join(d.path, 'broken-0.lua'), '--- @include "nowhere"');
    const loader = new LuaLoader({ dirs: [d.url] });
    expect(() => loader.load('absent').source).toThrow(/absent-<numKeys>\.lua/);
    expect(() => loader.load('broken').source).toThrow(/include "nowhere" \(in broken-0\.lua\) not found/);
  });

  it('gives every script the terminal states from TERMINAL_STATES (generated job-layout include)', () => {
    const source = busLua.load('job-transition').source;
    for (const state of TERMINAL_STATES) expect(source).toContain(`["${state}"] = true`);
    expect(source).not.toContain('@include');
  });
});
