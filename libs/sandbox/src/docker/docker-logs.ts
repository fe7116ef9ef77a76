import type Dockerode from 'dockerode';
import { lastLines } from '../log-tail.js';

/**
 * Without a TTY the engine multiplexes stdout and stderr into frames: 1 byte stream id, 3 bytes
 * padding, 4 bytes big-endian length, then the payload. A buffer that does not start like a frame
 * (a TTY container) is returned as it is.
 */
export function demuxDockerLog(buffer: Buffer): string {
  const chunks: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const stream = buffer[offset];
    if (stream !== 0 && stream !== 1 && stream !== 2) return buffer.toString('utf8');
    const length = buffer.readUInt32BE(offset + 4);
    chunks.push(buffer.subarray(offset + 8, offset + 8 + length));
    offset += 8 + length;
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function containerLogTail(container: Dockerode.Container, maxLines = 20): Promise<string[]> {
  try {
    const raw = (await container.logs({
      stdout: true,
      stderr: true,
      follow: false,
      tail: maxLines,
    })) as unknown;
    const buffer = Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw));
    return lastLines(demuxDockerLog(buffer), maxLines);
  } catch {
    return [];
  }
}
