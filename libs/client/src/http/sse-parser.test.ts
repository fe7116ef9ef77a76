import { describe, expect, it } from 'vitest';
import { parseEventStream, type ServerSentEvent } from './sse-parser.js';

async function parse(chunks: (string | Uint8Array)[]): Promise<ServerSentEvent[]> {
  const encoder = new TextEncoder();
  async function* body() {
    for (const c of chunks) yield typeof c === 'string' ? encoder.encode(c) : c;
  }
  const events: ServerSentEvent[] = [];
  for await (const e of parseEventStream(body())) events.push(e);
  return events;
}

describe('parseEventStream', () => {
  it('reads named events with ids and JSON data, skipping comments', async () => {
    const events = await parse([
      ': keep-alive\n\n',
      'id: 1-0\nevent: output\ndata: {"line":"a"}\n\n',
      'event: state\ndata: {"to":"succeeded"}\n\n',
    ]);
    expect(events).toEqual([
      { event: 'output', data: '{"line":"a"}', id: '1-0' },
      // The id carries over, as an EventSource's lastEventId does.
      { event: 'state', data: '{"to":"succeeded"}', id: '1-0' },
    ]);
  });

  it('joins data lines and accepts CRLF, CR and lines split across chunks', async () => {
    const events = await parse(['data: one\r\nda', 'ta: two\r', '\n\r', 'data:three\r\r']);
    expect(events).toEqual([
      { event: 'message', data: 'one\ntwo', id: undefined },
      { event: 'message', data: 'three', id: undefined },
    ]);
  });

  it('decodes a UTF-8 character split between chunks', async () => {
    const bytes = new TextEncoder().encode('data: é\n\n');
    const events = await parse([bytes.slice(0, 7), bytes.slice(7)]);
    expect(events).toEqual([{ event: 'message', data: 'é', id: undefined }]);
  });

  it('drops an event with no data and one cut off before its blank line', async () => {
    expect(await parse(['event: x\n\n', 'data: cut'])).toEqual([]);
  });
});
