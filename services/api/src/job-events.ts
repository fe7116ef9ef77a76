import type { SandstreamClient } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { followerStream, resumeCursor } from './sse.js';

/**
 * A job's or sandbox's timeline as server-sent events, from the SDK's follow(): each item is an
 * event named by its type with the stream entry id as its `id`, so an EventSource that
 * reconnects (Last-Event-ID) resumes right after the last event it saw: no line missed, none
 * twice. Ends after the terminal state.
 */
export async function streamTimeline(
  client: SandstreamClient,
  id: string,
  from: string | undefined,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const cursor = resumeCursor(request, from);
  const sse = followerStream(request, reply);
  try {
    for await (const item of client.follow(id, {
      signal: sse.signal,
      ...(cursor !== undefined ? { from: cursor } : {}),
    })) {
      const full = sse.send(item.type, item, item.cursor);
      if (full) await full;
    }
    sse.end();
  } catch (err) {
    if (sse.signal.aborted) sse.end();
    else await sse.fail(err);
  }
  return reply;
}
