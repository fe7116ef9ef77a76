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
 * an EventSource reports it for resuming with Last-Event-ID. A stream that ends without the
 * blank line after its last event does not dispatch it.
 */
export async function* parseEventStream(
  body: AsyncIterable<Uint8Array>,
): AsyncGenerator<ServerSentEvent, void, undefined> {
  const decoder = new TextDecoder('utf-8');
  const events = new EventAssembler();
  let rest = '';
  for await (const chunk of body) {
    rest = events.feed(rest + decoder.decode(chunk, { stream: true }), false);
    yield* events.take();
  }
  events.feed(rest + decoder.decode(), true);
  yield* events.take();
}

/** Turns lines into events; a chunk's events are handed out together (one yield per event after). */
class EventAssembler {
  private event = '';
  private data: string[] = [];
  private lastId: string | undefined;
  private ready: ServerSentEvent[] = [];

  /** Takes every complete line of `text`; answers what is left (a line still to be finished). */
  feed(text: string, final: boolean): string {
    let start = 0;
    // Searched for again only once passed: a stream without CRs costs one scan per chunk.
    let cr = text.indexOf('\r');
    for (;;) {
      if (cr !== -1 && cr < start) cr = text.indexOf('\r', start);
      const lf = text.indexOf('\n', start);
      let end: number;
      let next: number;
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        // A CR at the very end may be the first half of a CRLF still to come.
        if (cr === text.length - 1 && !final) break;
        end = cr;
        next = text.charCodeAt(cr + 1) === 10 ? cr + 2 : cr + 1;
      } else if (lf !== -1) {
        end = lf;
        next = lf + 1;
      } else break;
      this.line(text.slice(start, end));
      start = next;
    }
    return text.slice(start);
  }

  take(): ServerSentEvent[] {
    const ready = this.ready;
    this.ready = [];
    return ready;
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0)
        this.ready.push({ event: this.event || 'message', data: this.data.join('\n'), id: this.lastId });
      this.event = '';
      this.data = [];
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32 /* space */) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.lastId = value;
  }
}
