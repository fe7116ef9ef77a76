import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { locateSpawner, SPAWNER_NAME, spawnerCandidates } from './locate-spawner.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-locate-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function executable(file: string, mode = 0o755): Promise<string> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, '#!/bin/sh\n');
  await chmod(file, mode);
  return file;
}

describe('locateSpawner', () => {
  it('looks first in the directory of the loader the agent was started through', () => {
    const candidates = spawnerCandidates({
      execPath: '/shared/lib/ld-linux-x86-64.so.2',
      argv0: '/shared/sandstream-agent',
      cwd: '/work',
      codeDir: '/snapshot',
    });
    expect(candidates[0]).toBe(`/shared/lib/${SPAWNER_NAME}`);
  });

  it('finds the injected layout (lib/ beside the agent) and the build layout (runtime/lib/)', async () => {
    const injected = path.join(dir, 'shared');
    const spawner = await executable(path.join(injected, 'lib', SPAWNER_NAME));
    const facts = {
      execPath: path.join(injected, 'sandstream-agent'),
      argv0: 'x',
      cwd: dir,
      codeDir: '/none',
    };
    expect(locateSpawner('auto', facts)).toEqual({ path: spawner });

    const dist = path.join(dir, 'dist');
    const built = await executable(path.join(dist, 'runtime', 'lib', SPAWNER_NAME));
    // `node dist/main.js` (code in dist/) and the compiled modules (dist/process/).
    for (const codeDir of [dist, path.join(dist, 'process')]) {
      const node = { execPath: '/usr/bin/node', argv0: 'node', cwd: dir, codeDir };
      expect(locateSpawner('auto', node)).toEqual({ path: built });
    }
  });

  it('runs without it, saying where it looked, when there is none or it is not executable', async () => {
    const bare = path.join(dir, 'bare');
    await executable(path.join(bare, 'lib', SPAWNER_NAME), 0o644);
    const found = locateSpawner('auto', {
      execPath: path.join(bare, 'agent'),
      argv0: 'agent',
      cwd: bare,
      codeDir: bare,
    });
    expect(found.path).toBeNull();
    expect('reason' in found && found.reason).toContain(path.join(bare, 'lib', SPAWNER_NAME));
  });

  it('takes none to mean child_process, and rejects a named path that is not an executable', async () => {
    const facts = { execPath: '/x', argv0: 'x', cwd: dir, codeDir: dir };
    expect(locateSpawner('none', facts)).toEqual({ path: null, reason: '--spawner none' });
    expect(() => locateSpawner('missing-helper', facts)).toThrow(
      `--spawner ${path.join(dir, 'missing-helper')} is not an executable file`,
    );
    const named = await executable(path.join(dir, 'elsewhere', 'helper'));
    expect(locateSpawner('elsewhere/helper', facts)).toEqual({ path: named });
  });
});
