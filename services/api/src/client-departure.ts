import type { FastifyReply } from 'fastify';

/**
 * Runs `call` with a signal that aborts when the HTTP client goes away before the call ends: the
 * request owns what it started (a command, a code cell), and nobody is left to read its answer.
 */
export async function whileClientStays<T>(
  reply: FastifyReply,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const gone = new AbortController();
  let finished = false;
  reply.raw.once('close', () => {
    if (!finished) gone.abort();
  });
  try {
    return await call(gone.signal);
  } finally {
    finished = true;
  }
}
