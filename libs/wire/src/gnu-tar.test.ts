import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pack as tarPack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractWithGnuTar, findGnuTar } from './gnu-tar.js';

type Member = {
  name: string;
  type?: 'file' | 'symlink' | 'link' | 'directory';
  data?: string;
  linkname?: string;
};

/** A tar stream of exactly these members, however hostile, as chunks. */
async function* archive(members: Member[]): AsyncGenerator<Buffer> {
  const pack = tarPack();
  for (const m of members) {
    const type = m.type ?? 'file';
    const header = {
      name: m.name,
      type,
      ...(m.linkname ? { linkname: m.linkname } : {}),
      mode: type === 'directory' ? 0o755 : 0o644,
    };
    if (type === 'file') pack.entry(header, m.data ?? 'x');
    else pack.entry(header);
  }
  pack.finalize();
  for await (const chunk of pack) yield chunk as Buffer;
}

describe('GNU tar unpacking', () => {
  let root: string;
  let dest: string;
  let outside: string;
  let tar: string;
  beforeAll(async () => {
    // CI's machine has GNU tar; the agent falls back to tar-fs where it does not.
    tar = (await findGnuTar()) as string;
    expect(tar).toBe('tar');
    root = mkdtempSync(path.join(tmpdir(), 'gnu-tar-'));
    dest = path.join(root, 'dest');
    outside = path.join(root, 'outside');
    mkdirSync(dest);
    mkdirSync(outside);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('unpacks a tree and counts its regular files', async () => {
    const into = path.join(root, 'plain');
    mkdirSync(into);
    const { files } = await extractWithGnuTar(
      tar,
      archive([
        { name: 'a', type: 'directory' },
        { name: 'a/one.txt', data: 'one' },
        { name: 'a/two.txt', data: 'two' },
        { name: 'a/link', type: 'symlink', linkname: 'one.txt' },
      ]),
      into,
    );
    expect(files).toBe(2);
    expect(readFileSync(path.join(into, 'a', 'link'), 'utf8')).toBe('one');
  });

  it('writes nothing outside the target, whatever the archive names, and fails saying why', async () => {
    await expect(
      extractWithGnuTar(
        tar,
        archive([
          { name: 'ok.txt' },
          { name: '../outside/dotdot.txt' },
          { name: `${outside}/absolute.txt` },
          { name: 'l', type: 'symlink', linkname: outside },
          { name: 'l/through-absolute.txt' },
          { name: 'r', type: 'symlink', linkname: '../outside' },
          { name: 'r/through-relative.txt' },
          { name: 'h', type: 'link', linkname: '../outside/x' },
        ]),
        dest,
      ),
    ).rejects.toThrow(/Member name contains '\.\.'/);
    expect(readdirSync(outside)).toEqual([]);
    expect(readFileSync(path.join(dest, 'ok.txt'), 'utf8')).toBe('x');
    // An absolute name lands inside the target; the links exist, pointing where they say, unused.
    expect(existsSync(path.join(dest, outside, 'absolute.txt'))).toBe(true);
    expect(lstatSync(path.join(dest, 'l')).isSymbolicLink()).toBe(true);
  });

  it('stops tar and rethrows when the chunks fail (a transfer over its limit)', async () => {
    const into = path.join(root, 'cut');
    mkdirSync(into);
    async function* failing(): AsyncGenerator<Buffer> {
      for await (const chunk of archive([{ name: 'big.txt', data: 'y'.repeat(100_000) }])) {
        yield chunk.subarray(0, 1024);
        throw new Error('over the limit');
      }
    }
    await expect(extractWithGnuTar(tar, failing(), into)).rejects.toThrow('over the limit');
  });
});
