import { close, open, read } from 'node:fs';

/*
 * Small files read with the callback API on file descriptors: a `FileHandle` costs
 * more per call than the file's own system call, and a snapshot has thousands of small files.
 */

function call<T>(fn: (done: (err: NodeJS.ErrnoException | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));
}

/** A file's first `size` bytes (fewer when it shrank since its lstat), read whole: open, read, close. */
export async function readSmallFile(path: string, size: number): Promise<Buffer> {
  const fd = await call<number>((done) => open(path, 'r', done));
  try {
    const buffer = Buffer.allocUnsafe(size);
    let filled = 0;
    while (filled < size) {
      const got = await call<number>((done) => read(fd, buffer, filled, size - filled, null, done));
      if (got === 0) break;
      filled += got;
    }
    return filled === size ? buffer : buffer.subarray(0, filled);
  } finally {
    await call<void>((done) => close(fd, (err) => done(err, undefined)));
  }
}
