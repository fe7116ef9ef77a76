import { mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Limits, type WriteFileStep, WriteFileStepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordingContext } from './recording-context.js';
import { writeFileStep } from './write-file-step.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-write-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const step = (fields: Record<string, unknown>): WriteFileStep =>
  WriteFileStepSchema.parse({ schemaVersion: 1, stepId: 'w', kind: 'writeFile', ...fields });
const write = (fields: Record<string, unknown>) => writeFileStep(step(fields), recordingContext(dir).ctx);

describe('writeFileStep', () => {
  it('writes UTF-8 content, creating parent directories, and leaves no temp file', async () => {
    const outcome = await write({ path: 'a/b/c.txt', content: 'héllo' });
    expect(outcome).toEqual({
      exitCode: 0,
      timedOut: false,
      errorMessage: null,
      output: { kind: 'writeFile', path: path.join(dir, 'a/b/c.txt'), bytesWritten: 6 },
    });
    expect(await readFile(path.join(dir, 'a/b/c.txt'), 'utf8')).toBe('héllo');
    expect(await readdir(path.join(dir, 'a/b'))).toEqual(['c.txt']);
  });

  it('decodes base64 content, and refuses content that is not base64', async () => {
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    const outcome = await write({ path: 'bin.dat', content: bytes.toString('base64'), encoding: 'base64' });
    expect(outcome.output).toMatchObject({ bytesWritten: 5 });
    expect(await readFile(path.join(dir, 'bin.dat'))).toEqual(bytes);
    const bad = await write({ path: 'bad.dat', content: 'not base64!', encoding: 'base64' });
    expect(bad).toMatchObject({ errorCode: 'invalid_step' });
    expect(bad.errorMessage).toMatch(/not valid base64/);
  });

  it('refuses decoded content over the limit, naming it, and writes nothing', async () => {
    const max = Limits.writeFileMaxBytes;
    expect((await write({ path: 'exact.dat', content: 'x'.repeat(max) })).exitCode).toBe(0);
    const over = await write({
      path: 'over.dat',
      content: Buffer.alloc(max + 1).toString('base64'),
      encoding: 'base64',
    });
    expect(over).toMatchObject({ errorCode: 'limit_exceeded', exitCode: null });
    expect(over.errorMessage).toBe(`content is ${max + 1} bytes, over the writeFile limit of 10485760 bytes`);
    await expect(stat(path.join(dir, 'over.dat'))).rejects.toThrow(/ENOENT/);
  });

  it('honours an explicit mode regardless of the umask, and keeps a replaced file’s mode otherwise', async () => {
    await write({ path: 'script.sh', content: '#!/bin/sh\n', mode: 0o750 });
    expect((await stat(path.join(dir, 'script.sh'))).mode & 0o7777).toBe(0o750);
    await write({ path: 'script.sh', content: '#!/bin/sh\necho 2\n' });
    expect((await stat(path.join(dir, 'script.sh'))).mode & 0o7777).toBe(0o750);
    await write({ path: 'secret.txt', content: 's', mode: 0o600 });
    expect((await stat(path.join(dir, 'secret.txt'))).mode & 0o7777).toBe(0o600);
  });

  it('replaces atomically: a concurrent reader sees the old or the new content, never a mix', async () => {
    const size = 4 * 1024 * 1024;
    const oldContent = 'o'.repeat(size);
    const newContent = 'n'.repeat(size);
    await write({ path: 'big.txt', content: oldContent });
    let writing = true;
    const seen = new Set<string>();
    const reader = (async () => {
      while (writing) {
        const text = await readFile(path.join(dir, 'big.txt'), 'utf8');
        seen.add(text === oldContent ? 'old' : text === newContent ? 'new' : `torn(${text.length})`);
      }
    })();
    for (let i = 0; i < 4; i++)
      await write({ path: 'big.txt', content: i % 2 === 0 ? newContent : oldContent });
    writing = false;
    await reader;
    expect([...seen].filter((s) => s.startsWith('torn'))).toEqual([]);
    expect((await readdir(dir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('writes through a symlink instead of replacing the link', async () => {
    await writeFile(path.join(dir, 'real.txt'), 'old');
    await symlink('real.txt', path.join(dir, 'link.txt'));
    await write({ path: 'link.txt', content: 'new' });
    expect(await readFile(path.join(dir, 'real.txt'), 'utf8')).toBe('new');
    expect(await readlink(path.join(dir, 'link.txt'))).toBe('real.txt');
  });

  it('resolves against the workingDirectory', async () => {
    await mkdir(path.join(dir, 'wd'), { recursive: true });
    await write({ path: 'f.txt', content: 'x', workingDirectory: 'wd' });
    expect(await readFile(path.join(dir, 'wd/f.txt'), 'utf8')).toBe('x');
  });

  it('answers a directory target or a file in the parent path with invalid_step', async () => {
    await mkdir(path.join(dir, 'adir'), { recursive: true });
    expect((await write({ path: 'adir', content: 'x' })).errorMessage).toMatch(/is a directory/);
    await writeFile(path.join(dir, 'plain'), 'x');
    const outcome = await write({ path: 'plain/child.txt', content: 'x' });
    expect(outcome.errorCode).toBe('invalid_step');
    expect(outcome.errorMessage).toMatch(/a part of it is a file/);
  });
});
