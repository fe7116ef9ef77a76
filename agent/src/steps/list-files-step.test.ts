import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type FileEntry, Limits, type ListFilesStep, ListFilesStepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareTreePaths, listFilesStep } from './list-files-step.js';
import { recordingContext } from './recording-context.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-list-'));
  // tree/
  //   a-b.txt (3 bytes)   a/ (x.txt 5 bytes, deep/ (z.txt))   b.txt   loop -> .   link.txt -> b.txt
  const tree = path.join(dir, 'tree');
  await mkdir(path.join(tree, 'a', 'deep'), { recursive: true });
  await writeFile(path.join(tree, 'a-b.txt'), 'abc');
  await writeFile(path.join(tree, 'a', 'x.txt'), '12345');
  await writeFile(path.join(tree, 'a', 'deep', 'z.txt'), 'z');
  await writeFile(path.join(tree, 'b.txt'), '');
  await symlink('.', path.join(tree, 'loop'));
  await symlink('b.txt', path.join(tree, 'link.txt'));
});
afterAll(async () => {
  await chmod(path.join(dir, 'tree'), 0o755).catch(() => {});
  await rm(dir, { recursive: true, force: true });
});

const step = (fields: Record<string, unknown>): ListFilesStep =>
  ListFilesStepSchema.parse({ schemaVersion: 1, stepId: 'l', kind: 'listFiles', ...fields });
const list = async (fields: Record<string, unknown>) =>
  listFilesStep(step(fields), recordingContext(dir).ctx);
const paths = (entries: FileEntry[] | undefined) => entries?.map((e) => e.path);
const entriesOf = (outcome: Awaited<ReturnType<typeof list>>) =>
  outcome.output?.kind === 'listFiles' ? outcome.output : undefined;

describe('listFilesStep', () => {
  it('lists one level by default, with types and sizes, sorted', async () => {
    const outcome = await list({ path: 'tree' });
    expect(outcome.exitCode).toBe(0);
    expect(entriesOf(outcome)).toEqual({
      kind: 'listFiles',
      path: path.join(dir, 'tree'),
      truncated: false,
      entries: [
        { path: 'a', type: 'directory', sizeBytes: 0 },
        { path: 'a-b.txt', type: 'file', sizeBytes: 3 },
        { path: 'b.txt', type: 'file', sizeBytes: 0 },
        { path: 'link.txt', type: 'symlink', sizeBytes: 'b.txt'.length },
        { path: 'loop', type: 'symlink', sizeBytes: 1 },
      ],
    });
  });

  it('descends to maxDepth as a tree, without following symlinked directories', async () => {
    expect(paths(entriesOf(await list({ path: 'tree', maxDepth: 2 }))?.entries)).toEqual([
      'a',
      'a/deep',
      'a/x.txt',
      'a-b.txt',
      'b.txt',
      'link.txt',
      'loop',
    ]);
    const deep = entriesOf(await list({ path: 'tree', maxDepth: Limits.listFilesMaxDepth }));
    expect(paths(deep?.entries)).toContain('a/deep/z.txt');
    expect(paths(deep?.entries)?.some((p) => p.startsWith('loop/'))).toBe(false);
  });

  it('cuts at maxEntries keeping shallow entries first, and says so', async () => {
    const cut = entriesOf(await list({ path: 'tree', maxDepth: 3, maxEntries: 6 }));
    expect(cut?.truncated).toBe(true);
    // All five top-level entries survive; one slot is left for the first entry of "a".
    expect(paths(cut?.entries)).toEqual(['a', 'a/deep', 'a-b.txt', 'b.txt', 'link.txt', 'loop']);
    const exact = entriesOf(await list({ path: 'tree', maxDepth: 1, maxEntries: 5 }));
    expect(exact?.truncated).toBe(false);
    const exactDeep = entriesOf(await list({ path: 'tree', maxDepth: 3, maxEntries: 8 }));
    expect(exactDeep).toMatchObject({ truncated: false });
    expect(exactDeep?.entries).toHaveLength(8);
  });

  it('when exactly full with directories still waiting, is cut only if one of them has entries', async () => {
    // Full after "a" (five top-level entries and a's two) while a/deep, holding z.txt, waits.
    const full = entriesOf(await list({ path: 'tree', maxDepth: 3, maxEntries: 7 }));
    expect(full).toMatchObject({ truncated: true });
    expect(paths(full?.entries)).toEqual(['a', 'a/deep', 'a/x.txt', 'a-b.txt', 'b.txt', 'link.txt', 'loop']);
    // Full after the top level while only empty directories wait: nothing was left out.
    const hollow = path.join(dir, 'hollow');
    await mkdir(path.join(hollow, 'e1'), { recursive: true });
    await mkdir(path.join(hollow, 'e2'));
    await writeFile(path.join(hollow, 'f.txt'), '');
    const exact = entriesOf(await list({ path: 'hollow', maxDepth: 2, maxEntries: 3 }));
    expect(exact).toMatchObject({ truncated: false });
    expect(paths(exact?.entries)).toEqual(['e1', 'e2', 'f.txt']);
  });

  it('answers the same listing every time', async () => {
    const first = await list({ path: 'tree', maxDepth: 3 });
    const second = await list({ path: 'tree', maxDepth: 3 });
    expect(second).toEqual(first);
  });

  it('lists large directories only up to the entry limit', async () => {
    const big = path.join(dir, 'big');
    await mkdir(big);
    await Promise.all(
      Array.from({ length: Limits.listFilesMaxEntries + 5 }, (_, i) =>
        writeFile(path.join(big, `f${String(i).padStart(4, '0')}`), ''),
      ),
    );
    const outcome = entriesOf(await list({ path: 'big' }));
    expect(outcome?.entries).toHaveLength(1000);
    expect(outcome?.truncated).toBe(true);
    expect(outcome?.entries[999]?.path).toBe('f0999');
  });

  it('refuses a maxDepth over the limit at the schema, naming it', () => {
    const parsed = ListFilesStepSchema.safeParse({
      schemaVersion: 1,
      stepId: 'l',
      kind: 'listFiles',
      maxDepth: 33,
    });
    expect(parsed.error?.issues[0]?.message).toBe('maxDepth is at most 32');
  });

  it('refuses a maxEntries over the limit at the schema, naming it', () => {
    const parsed = ListFilesStepSchema.safeParse({
      schemaVersion: 1,
      stepId: 'l',
      kind: 'listFiles',
      maxEntries: 1001,
    });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.message).toBe('maxEntries is at most 1000');
  });

  it('answers a missing path with not_found and a file with invalid_step', async () => {
    expect(await list({ path: 'nope' })).toMatchObject({ errorCode: 'not_found' });
    const file = await list({ path: 'tree/b.txt' });
    expect(file.errorCode).toBe('invalid_step');
    expect(file.errorMessage).toMatch(/not a directory/);
  });

  it('stops when cancelled', async () => {
    const r = recordingContext(dir);
    r.abort.abort();
    expect((await listFilesStep(step({ path: 'tree' }), r.ctx)).errorCode).toBe('cancelled');
  });

  it('orders paths segment by segment', () => {
    expect(['a-b', 'a/x', 'a', 'b'].sort(compareTreePaths)).toEqual(['a', 'a/x', 'a-b', 'b']);
  });
});
