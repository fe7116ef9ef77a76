import type { SandstreamClient } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { followerStream, resumeCursor } from './sse.js';
import { timelineEvent } from './timeline-event.js';

/**
 * A job's or sandbox's timeline as server-sent events, from the SDK's follow() (a page at a time): each item is an
 * event named by its type with the stream entry id as its `id`, so an EventSource that
 * reconnects (Last-Event-ID) resumes right after the last event it saw: no line missed, none
 * twice. Ends after the terminal state, or with `?follow=false` at what the stream holds now.
 */
export async function streamTimeline(
  client: SandstreamClient,
  id: string,
  query: { from?: string | undefined; follow?: 'true' | 'false' | undefined },
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const cursor = resumeCursor(request, query.from);
  const untilNow = query.follow === 'false';
  const sse = followerStream(request, reply);
  try {
    // A page of the stream (one read) leaves in one write: no await or write per line.
    for await (const page of client.followPages(id, {
      signal: sse.signal,
      ...(cursor !== undefined ? { from: cursor } : {}),
      ...(untilNow ? { untilNow } : {}),
    })) {
      let text = '';
      for (const item of page) text += timelineEvent(item);
      const full = sse.sendText(text);
      if (full) await full;
    }
    // A stream that ends without the terminal state is otherwise a cut connection to resume:
    // `end` says that it ended because it was asked to (follow=false).
    if (untilNow) sse.sendText('event: end\ndata: {}\n\n');
    sse.end();
  } catch (err) {
    if (sse.signal.aborted) sse.end();
    else await sse.fail(err);
  }
  return reply;
}
