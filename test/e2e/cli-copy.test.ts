import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRANSPORTS, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// `sandstream cp` by docker cp's rules (SRC file / directory, DEST missing / file / directory,
// trailing slashes, the `/.` suffix), both ways, over both transports. Sandbox paths are
// relative: in-process, file steps are confined to the sandbox's own directory.
const cliPath = join(repoRoot, 'libs/client/bin/sandstream.mjs');

describe.each(TRANSPORTS)('sandstream cp (over %s)', (transport) => {
  let stack: Stack;
  let view: TransportView;
  let id: string;
  let local: string;
  beforeAll(async () => {
    stack = await startStack({ label: transport === 'http' ? 'cpyh' : 'cpy' });
    view = await viewThrough(stack, transport, testRedisUrl());
    const created = cli('sandbox', 'create', 'debian:bookworm-slim', '--id', `${stack.namespace}-cp`);
    expect(created.status, created.stderr).toBe(0);
    id = created.stdout.trim();
    // src/sub/a.txt and f.txt to download; up/ and up/existing.txt to upload onto.
    const setup = sh(
      'mkdir -p src/sub up && echo one > src/sub/a.txt && echo file > f.txt && echo old > up/existing.txt',
    );
    expect(setup.status, setup.stderr).toBe(0);
  });
  afterAll(async () => {
    await view?.stop();
    await stack?.stop();
  });
  const cli = (...args: string[]) =>
    spawnSync(process.execPath, [cliPath, ...args], {
      env: { ...process.env, ...view.clientEnv },
      encoding: 'utf8',
      timeout: 60_000,
    });
  const sh = (script: string) => cli('exec', '--shell', id, '--', script);
  const fresh = () => {
    local = mkdtempSync(join(tmpdir(), 'sandstream-cli-cp-'));
    return local;
  };
  afterAll(() => {
    if (local) rmSync(local, { recursive: true, force: true });
  });

  describe('out of the sandbox', () => {
    it('a file onto a missing path is written as that file (not a directory holding it)', () => {
      const dir = fresh();
      const r = cli('cp', `${id}:f.txt`, join(dir, 'single.txt'));
      expect(r.status, r.stderr).toBe(0);
      expect(statSync(join(dir, 'single.txt')).isFile()).toBe(true);
      expect(readFileSync(join(dir, 'single.txt'), 'utf8')).toBe('file\n');
      // The staging directory it unpacked into is gone.
      expect(spawnSync('ls', ['-A', dir], { encoding: 'utf8' }).stdout).toBe('single.txt\n');
    });
    it('a file onto a missing path ending in / is refused: the directory must exist', () => {
      const dir = fresh();
      const r = cli('cp', `${id}:f.txt`, `${join(dir, 'nodir')}/`);
      expect(r.status).toBe(4);
      expect(r.stderr).toMatch(/does not exist/);
      expect(existsSync(join(dir, 'nodir'))).toBe(false);
    });
    it('a file onto an existing file overwrites it', () => {
      const dir = fresh();
      writeFileSync(join(dir, 'there.txt'), 'before\n');
      expect(cli('cp', `${id}:f.txt`, join(dir, 'there.txt')).status).toBe(0);
      expect(readFileSync(join(dir, 'there.txt'), 'utf8')).toBe('file\n');
    });
    it('a file onto an existing directory lands in it under its own name', () => {
      const dir = fresh();
      expect(cli('cp', `${id}:f.txt`, dir).status).toBe(0);
      expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('file\n');
    });
    it('a file given with a trailing slash is refused', () => {
      const dir = fresh();
      const r = cli('cp', `${id}:f.txt/`, dir);
      expect(r.status).not.toBe(0);
      expect(existsSync(join(dir, 'f.txt'))).toBe(false);
    });
    it('a directory onto a missing path becomes that directory, with its contents', () => {
      const dir = fresh();
      expect(cli('cp', `${id}:src`, join(dir, 'copy')).status).toBe(0);
      expect(readFileSync(join(dir, 'copy', 'sub', 'a.txt'), 'utf8')).toBe('one\n');
    });
    it('a directory onto an existing file is refused', () => {
      const dir = fresh();
      writeFileSync(join(dir, 'plain'), 'x');
      const r = cli('cp', `${id}:src`, join(dir, 'plain'));
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/cannot copy a directory/);
      expect(readFileSync(join(dir, 'plain'), 'utf8')).toBe('x');
    });
    it('a directory onto an existing directory lands in it under its own name; with /. its contents do', () => {
      const dir = fresh();
      mkdirSync(join(dir, 'into'));
      expect(cli('cp', `${id}:src`, join(dir, 'into')).status).toBe(0);
      expect(readFileSync(join(dir, 'into', 'src', 'sub', 'a.txt'), 'utf8')).toBe('one\n');
      mkdirSync(join(dir, 'merge'));
      writeFileSync(join(dir, 'merge', 'kept.txt'), 'kept');
      expect(cli('cp', `${id}:src/.`, join(dir, 'merge')).status).toBe(0);
      expect(readFileSync(join(dir, 'merge', 'sub', 'a.txt'), 'utf8')).toBe('one\n');
      expect(readFileSync(join(dir, 'merge', 'kept.txt'), 'utf8')).toBe('kept');
    });
    it('a missing sandbox path exits 4', () => {
      const dir = fresh();
      const r = cli('cp', `${id}:/nonexistent`, dir);
      expect(r.status).toBe(4);
      expect(r.stderr).toMatch(/nonexistent: no such file or directory/);
    });
  });

  describe('into the sandbox', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'sandstream-cli-cp-in-'));
      mkdirSync(join(dir, 'tree', 'sub'), { recursive: true });
      writeFileSync(join(dir, 'tree', 'sub', 'b.txt'), 'two\n');
      writeFileSync(join(dir, 'one.txt'), 'new\n');
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('a file onto a missing path is written as that file', () => {
      expect(cli('cp', join(dir, 'one.txt'), `${id}:up/renamed.txt`).status).toBe(0);
      expect(sh('test -f up/renamed.txt && cat up/renamed.txt').stdout).toBe('new\n');
    });
    it('a file onto a missing path ending in / is refused', () => {
      const r = cli('cp', join(dir, 'one.txt'), `${id}:up/nodir/`);
      expect(r.status).toBe(4);
      expect(sh('test -e up/nodir || echo absent').stdout).toBe('absent\n');
    });
    it('a file onto an existing file overwrites it; onto a directory lands in it', () => {
      expect(cli('cp', join(dir, 'one.txt'), `${id}:up/existing.txt`).status).toBe(0);
      expect(sh('cat up/existing.txt').stdout).toBe('new\n');
      expect(cli('cp', join(dir, 'one.txt'), `${id}:up`).status).toBe(0);
      expect(sh('cat up/one.txt').stdout).toBe('new\n');
    });
    it('a directory onto a missing path becomes it; onto a file is refused', () => {
      expect(cli('cp', join(dir, 'tree'), `${id}:up/made`).status).toBe(0);
      expect(sh('cat up/made/sub/b.txt').stdout).toBe('two\n');
      const r = cli('cp', join(dir, 'tree'), `${id}:up/existing.txt`);
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/cannot copy a directory/);
    });
    it('a directory onto a directory lands under its name; with /. its contents do', () => {
      sh('mkdir -p up/in up/merge');
      expect(cli('cp', join(dir, 'tree'), `${id}:up/in`).status).toBe(0);
      expect(sh('cat up/in/tree/sub/b.txt').stdout).toBe('two\n');
      expect(cli('cp', `${join(dir, 'tree')}/.`, `${id}:up/merge`).status).toBe(0);
      expect(sh('cat up/merge/sub/b.txt; test -e up/merge/tree || echo flat').stdout).toBe('two\nflat\n');
    });
    it('a missing local path exits 4', () => {
      const r = cli('cp', join(dir, 'absent'), `${id}:up`);
      expect(r.status).toBe(4);
    });
  });
});
