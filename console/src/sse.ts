import { ApiError, request } from './api';

export interface SseEvent {
  event: string;
  id: string | undefined;
  data: string;
}

export interface FollowOptions {
  signal: AbortSignal;
  onEvent: (event: SseEvent) => void;
  /** Told when the connection drops and is being resumed, and when it is back. */
  onStatus?: (status: 'live' | 'reconnecting' | 'ended', detail?: string) => void;
  /** Stop following (no reconnect) once this returns true for an event. */
  isLast?: (event: SseEvent) => boolean;
}

/**
 * Follows an SSE endpoint of the API with fetch (EventSource cannot send the bearer key) and
 * resumes after a dropped connection from the last event id it saw (Last-Event-ID), so nothing
 * is shown twice and nothing is skipped; the server marks what its capped stream no longer holds
 * with `gap` events.
 */
export async function followEvents(path: string, options: FollowOptions): Promise<void> {
  let lastId: string | undefined;
  let delayMs = 500;
  while (!options.signal.aborted) {
    try {
      const response = await request(path, {
        accept: 'text/event-stream',
        signal: options.signal,
        ...(lastId ? { headers: { 'last-event-id': lastId } } : {}),
      });
      options.onStatus?.('live');
      delayMs = 500;
      let done = false;
      for await (const event of parseStream(response)) {
        if (event.id) lastId = event.id;
        options.onEvent(event);
        if (event.event === 'end' || options.isLast?.(event)) done = true;
      }
      if (done) {
        options.onStatus?.('ended');
        return;
      }
    } catch (err) {
      if (options.signal.aborted) return;
      // A refusal (403, 404) will not get better by asking again.
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) {
        options.onStatus?.('ended', err.message);
        return;
      }
      options.onStatus?.('reconnecting', err instanceof Error ? err.message : String(err));
    }
    if (options.signal.aborted) return;
    options.onStatus?.('reconnecting');
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    delayMs = Math.min(delayMs * 2, 10_000);
  }
}

/** The events of a text/event-stream body (the subset of the format the API writes). */
export async function* parseStream(response: Response): AsyncGenerator<SseEvent> {
  if (!response.body) return;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = parseBlock(block);
      if (event) yield event;
      end = buffer.indexOf('\n\n');
    }
  }
}

function parseBlock(block: string): SseEvent | undefined {
  let event = 'message';
  let id: string | undefined;
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0 && event === 'message') return undefined;
  return { event, id, data: data.join('\n') };
}
