import { Readable } from 'node:stream';
import { SandboxFileError } from './sandbox-errors.js';

/**
 * One file as a tar stream, and back: how `files.read(path, { format: 'bytes' | 'stream' })`
 * and a streamed `files.write` ride the transfers both transports already have (a tar stream
 * in 1 MiB chunks over Redis, `…/archive` over HTTP), binary-safe and never whole in memory.
 */

const BLOCK = 512;

/** The content of the first file of a tar stream (the one `download(path)` of a file sends). */
export function fileOfTar(tar: Readable, path: string): Readable {
  return Readable.from(fileChunks(tar, path), { objectMode: false });
}

async function* fileChunks(tar: Readable, path: string): AsyncGenerator<Buffer> {
  let pending: Buffer = Buffer.alloc(0);
  const source = tar[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  /** Reads until `pending` holds at least `n` bytes; false at the end of the stream. */
  const fill = async (n: number): Promise<boolean> => {
    while (pending.length < n) {
      const next = await source.next();
      if (next.done) return false;
      pending = pending.length === 0 ? next.value : Buffer.concat([pending, next.value]);
    }
    return true;
  };
  try {
    for (;;) {
      if (!(await fill(BLOCK)))
        throw new SandboxFileError(`path ${path}: the tar stream ended early`, 'io_error');
      const header = pending.subarray(0, BLOCK);
      if (header.every((b) => b === 0))
        throw new SandboxFileError(`path ${path}: no file in the tar stream`, 'io_error');
      const type = String.fromCharCode(header[156] ?? 0);
      const size = octal(header.subarray(124, 136));
      pending = pending.subarray(BLOCK);
      if (type === '0' || type === '\0' || type === '7') {
        let left = size;
        while (left > 0) {
          if (pending.length === 0 && !(await fill(1)))
            throw new SandboxFileError(`path ${path}: the tar stream ended early`, 'io_error');
          const take = pending.subarray(0, Math.min(left, pending.length));
          pending = pending.subarray(take.length);
          left -= take.length;
          yield Buffer.from(take);
        }
        return;
      }
      if (type === '5') throw new SandboxFileError(`path ${path} is a directory, not a file`, 'invalid_step');
      if (type !== 'x' && type !== 'g' && type !== 'L' && type !== 'K')
        throw new SandboxFileError(`path ${path} is not a regular file`, 'invalid_step');
      // Metadata of the entry that follows (long names, pax attributes): skipped.
      const padded = Math.ceil(size / BLOCK) * BLOCK;
      if (!(await fill(padded)))
        throw new SandboxFileError(`path ${path}: the tar stream ended early`, 'io_error');
      pending = pending.subarray(padded);
    }
  } finally {
    // What follows the file (the end blocks) is not wanted: the transfer is let go.
    await source.return?.();
    tar.destroy();
  }
}

/** A tar header's number: octal text, or base-256 when its first byte's high bit is set. */
function octal(field: Buffer): number {
  if ((field[0] ?? 0) & 0x80) {
    let value = 0;
    for (let i = 1; i < field.length; i++) value = value * 256 + (field[i] ?? 0);
    return value;
  }
  const text = field.toString('ascii').replace(/\0.*$/s, '').trim();
  return text === '' ? 0 : Number.parseInt(text, 8);
}

/** The longest size a plain ustar header holds (11 octal digits). */
const USTAR_MAX_SIZE = 8 ** 11 - 1;

/** A tar stream of one regular file `name` (no slashes) of `size` bytes read from `content`. */
export function tarOfFile(
  name: string,
  size: number,
  mode: number,
  content: AsyncIterable<Uint8Array>,
): Readable {
  if (Buffer.byteLength(name) > 100 || name.includes('/') || name === '' || name === '.' || name === '..')
    throw new SandboxFileError(
      `file name "${name}" cannot be sent as one tar entry (1 … 100 bytes, no "/")`,
      'invalid_step',
    );
  if (size > USTAR_MAX_SIZE)
    throw new SandboxFileError(`file is ${size} bytes, over ${USTAR_MAX_SIZE}`, 'limit_exceeded');
  return Readable.from(
    (async function* () {
      yield header(name, size, mode);
      let sent = 0;
      for await (const chunk of content) {
        sent += chunk.length;
        if (sent > size)
          throw new SandboxFileError(`the file grew past ${size} bytes while being sent`, 'io_error');
        yield Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
      }
      if (sent !== size)
        throw new SandboxFileError(`the file is ${sent} bytes, not the ${size} announced`, 'io_error');
      yield Buffer.alloc(((BLOCK - (size % BLOCK)) % BLOCK) + 2 * BLOCK);
    })(),
    { objectMode: false },
  );
}

function header(name: string, size: number, mode: number): Buffer {
  const h = Buffer.alloc(BLOCK);
  const put = (offset: number, length: number, value: string) => h.write(value, offset, length, 'utf8');
  const num = (offset: number, length: number, value: number) =>
    put(offset, length, `${value.toString(8).padStart(length - 1, '0')}\0`);
  put(0, 100, name);
  num(100, 8, mode & 0o7777);
  num(108, 8, 0);
  num(116, 8, 0);
  num(124, 12, size);
  num(136, 12, Math.floor(Date.now() / 1000));
  put(148, 8, '        ');
  put(156, 1, '0');
  put(257, 6, 'ustar\0');
  put(263, 2, '00');
  let sum = 0;
  for (const b of h) sum += b;
  put(148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return h;
}
