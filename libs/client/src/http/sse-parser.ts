/** One server-sent event: its `event` name (default `message`), `data` lines joined, and `id`. */
export interface ServerSentEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * Parses a `text/event-stream` body as the WHATWG spec reads it: lines end in LF, CRLF or CR;
 * a blank line dispatches the event; `:` lines are comments (keep-alives); `data` lines join
 * with LF; an event with no data is not dispatched. Bytes are decoded as one UTF-8 stream, so a
 * character split across chunks comes out whole. The `id` of an event is the last id seen, as
 * an EventSource reports it for resuming with Last-Event-ID.
 */
export async function* parseEventStream(
  body: AsyncIterable<Uint8Array>,
): AsyncGenerator<ServerSentEvent, void, undefined> {
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  let event = '';
  let data: string[] = [];
  let lastId: string | undefined;
  const take = function* (line: string): Generator<ServerSentEvent> {
    if (line === '') {
      if (data.length > 0) yield { event: event || 'message', data: data.join('\n'), id: lastId };
      event = '';
      data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id' && !value.includes('\0')) lastId = value;
  };
  const lines = function* (final: boolean): Generator<string> {
    for (;;) {
      const at = buffer.search(/\r\n|\r|\n/);
      if (at === -1) break;
      // A CR at the very end may be the first half of a CRLF still to come.
      if (buffer[at] === '\r' && at === buffer.length - 1 && !final) break;
      const width = buffer.startsWith('\r\n', at) ? 2 : 1;
      yield buffer.slice(0, at);
      buffer = buffer.slice(at + width);
    }
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (const line of lines(false)) yield* take(line);
  }
  buffer += decoder.decode();
  for (const line of lines(true)) yield* take(line);
  // A stream that ends without the blank line after its last event does not dispatch it.
}
