import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Limits, type ReadFileStep, ReadFileStepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileStep, readUpTo } from './read-file-step.js';
import { recordingContext } from './recording-context.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-read-'));
  await mkdir(path.join(dir, 'sub'));
  await writeFile(path.join(dir, 'sub', 'hello.txt'), 'héllo\nwörld\n');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const step = (fields: Record<string, unknown>): ReadFileStep =>
  ReadFileStepSchema.parse({ schemaVersion: 1, stepId: 'r', kind: 'readFile', ...fields });
const read = (fields: Record<string, unknown>) => readFileStep(step(fields), recordingContext(dir).ctx);

describe('readFileStep', () => {
  it('reads a UTF-8 file relative to the base directory', async () => {
    expect(await read({ path: 'sub/hello.txt' })).toEqual({
      exitCode: 0,
      timedOut: false,
      errorMessage: null,
      output: {
        kind: 'readFile',
        path: path.join(dir, 'sub/hello.txt'),
        content: 'héllo\nwörld\n',
        sizeBytes: Buffer.byteLength('héllo\nwörld\n'),
      },
    });
  });

  it('resolves relative paths against the workingDirectory, and takes absolute paths as they are', async () => {
    expect((await read({ path: 'hello.txt', workingDirectory: 'sub' })).output).toMatchObject({
      content: 'héllo\nwörld\n',
    });
    expect((await read({ path: path.join(dir, 'sub/hello.txt'), workingDirectory: '/' })).exitCode).toBe(0);
  });

  it('accepts a file of exactly the limit and refuses one byte more, naming the limit', async () => {
    const max = Limits.readFileMaxBytes;
    await writeFile(path.join(dir, 'exact.txt'), 'a'.repeat(max));
    await writeFile(path.join(dir, 'over.txt'), 'a'.repeat(max + 1));
    expect((await read({ path: 'exact.txt' })).exitCode).toBe(0);
    const over = await read({ path: 'over.txt' });
    expect(over).toMatchObject({ errorCode: 'limit_exceeded', exitCode: null });
    expect(over.errorMessage).toBe(`file is ${max + 1} bytes, over the readFile limit of 1048576 bytes`);
  });

  it('enforces the limit on files whose size the kernel does not report', async () => {
    // /proc files stat as 0 bytes; a 16-byte limit makes /proc/self/status (always larger) trip it.
    const outcome = await readFileStep(step({ path: '/proc/self/status' }), recordingContext(dir).ctx, 16);
    expect(outcome.errorCode).toBe('limit_exceeded');
  });

  it('rejects binary content: NUL bytes and invalid UTF-8', async () => {
    await writeFile(path.join(dir, 'nul.bin'), Buffer.from([0x61, 0x00, 0x62]));
    await writeFile(path.join(dir, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    const nul = await read({ path: 'nul.bin' });
    expect(nul.errorCode).toBe('invalid_step');
    expect(nul.errorMessage).toMatch(/binary \(NUL byte at offset 1\)/);
    const latin1 = await read({ path: 'latin1.txt' });
    expect(latin1.errorCode).toBe('invalid_step');
    expect(latin1.errorMessage).toMatch(/not valid UTF-8/);
  });

  it('answers a missing file with not_found naming it', async () => {
    const outcome = await read({ path: 'missing.txt' });
    expect(outcome).toMatchObject({ errorCode: 'not_found', exitCode: null });
    expect(outcome.errorMessage).toContain(path.join(dir, 'missing.txt'));
  });

  it('refuses directories and FIFOs without blocking', async () => {
    expect((await read({ path: 'sub' })).errorMessage).toMatch(/is a directory/);
    execFileSync('mkfifo', [path.join(dir, 'pipe')]);
    expect((await read({ path: 'pipe' })).errorMessage).toMatch(/not a regular file/);
  });

  it('answers a path with a NUL byte instead of throwing', async () => {
    // The wire refuses it before a step reaches here; this is the executor's own guard.
    const nul = { ...step({ path: 'a' }), path: 'a\u0000b' };
    expect((await readFileStep(nul, recordingContext(dir).ctx)).errorCode).toBe('invalid_step');
  });
});

describe('readUpTo', () => {
  const withFile = async <T>(content: Buffer, use: (h: Awaited<ReturnType<typeof open>>) => Promise<T>) => {
    const file = path.join(dir, `grow-${content.length}.txt`);
    await writeFile(file, content);
    const handle = await open(file);
    try {
      return await use(handle);
    } finally {
      await handle.close();
    }
  };
  const content = Buffer.from('x'.repeat(200_000));

  it('reads past a size that was too small (a file that grew, a /proc file), growing its buffer', async () => {
    for (const statSize of [0, 1, 1000]) {
      const { bytes, length } = await withFile(content, (h) => readUpTo(h, statSize, 1_000_000));
      expect(length).toBe(content.length);
      expect(bytes.subarray(0, length).equals(content)).toBe(true);
    }
  });

  it('stops at the cap, so a caller can tell the file went over its limit', async () => {
    const { length } = await withFile(content, (h) => readUpTo(h, 0, 70_001));
    expect(length).toBe(70_001);
  });

  it('sizes the buffer from stat: a small file does not cost the whole limit', async () => {
    const small = Buffer.from('hello\n');
    const { bytes, length } = await withFile(small, (h) =>
      readUpTo(h, small.length, Limits.readFileMaxBytes + 1),
    );
    expect(length).toBe(small.length);
    expect(bytes.length).toBe(small.length + 1);
  });
});
