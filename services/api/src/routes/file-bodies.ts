import type { WriteFileOptions } from '@sandstream/client';
import type { FastifyReply } from 'fastify';
import { HttpProblem } from '../problem.js';

/** A file's text as the answer, sent as it is (not as a JSON string). */
export function sendText(reply: FastifyReply, content: string) {
  return reply
    .type('text/plain; charset=utf-8')
    .serializer((s: string) => s)
    .send(content);
}

/** Whatever takes a file write: a sandbox's files, a volume's. */
interface FileWriter {
  write(path: string, content: string | Uint8Array, options?: WriteFileOptions): Promise<number>;
}

/**
 * A PUT of a file: the request body is its content (text/plain or application/octet-stream,
 * anything else 415), written atomically at `path` with `mode` when one is given.
 */
export async function writeFileBody(
  files: FileWriter,
  query: { path: string; mode?: number },
  body: unknown,
): Promise<{ path: string; bytesWritten: number }> {
  if (typeof body !== 'string' && !Buffer.isBuffer(body)) {
    throw new HttpProblem(
      415,
      'unsupported-media-type',
      'the body must be text/plain or application/octet-stream',
    );
  }
  const bytesWritten = await files.write(
    query.path,
    typeof body === 'string' ? body : new Uint8Array(body),
    query.mode !== undefined ? { mode: query.mode } : {},
  );
  return { path: query.path, bytesWritten };
}
