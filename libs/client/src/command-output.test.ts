import { decodeEventFields, encodeEvent, SCHEMA_VERSION } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { execItemOf } from './command-output.js';
import { parseEventStream } from './http/sse-parser.js';

/** One event as the API writes it (services/api sse.ts sseEvent): its name and JSON data. */
const sseEvent = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** The API's event stream as the HTTP transport reads it, from the text the API writes. */
async function readBack(text: string) {
  const events = [];
  async function* body() {
    yield new TextEncoder().encode(text);
  }
  for await (const event of parseEventStream(body())) events.push(event);
  return events;
}

describe('execItemOf', () => {
  it('makes the same line of an agent event (Redis) and of the API event written from it (HTTP)', async () => {
    const event = decodeEventFields(
      encodeEvent({
        schemaVersion: SCHEMA_VERSION,
        stepId: 'cmd-1',
        kind: 'stderr',
        seq: 4,
        line: 'oops',
        timestamp: new Date().toISOString(),
      }),
    );
    if (!event) throw new Error('the event did not decode');
    const fromRedis = execItemOf(event.kind, event);
    expect(fromRedis).toEqual({ stream: 'stderr', line: 'oops', seq: 4 });

    // The API writes the item itself as the event's data, named by its stream (sendExecution).
    const [sse] = await readBack(sseEvent('stderr', fromRedis));
    if (!sse) throw new Error('no event read back');
    expect(execItemOf(sse.event, JSON.parse(sse.data))).toEqual(fromRedis);
  });

  it('reads a gap, and an empty line as an empty string', async () => {
    const [gap, empty] = await readBack(
      sseEvent('gap', { stream: 'gap', from: 3, to: 9 }) +
        sseEvent('stdout', { stream: 'stdout', line: '', seq: 10 }),
    );
    if (!gap || !empty) throw new Error('events missing');
    expect(execItemOf(gap.event, JSON.parse(gap.data))).toEqual({ stream: 'gap', from: 3, to: 9 });
    expect(execItemOf(empty.event, JSON.parse(empty.data))).toEqual({ stream: 'stdout', line: '', seq: 10 });
  });

  it('reads an agent event without a line (an empty one) as an empty line, as the Redis follower always did', () => {
    const event = decodeEventFields(
      encodeEvent({
        schemaVersion: SCHEMA_VERSION,
        stepId: 'cmd-1',
        kind: 'stdout',
        seq: 2,
        timestamp: new Date().toISOString(),
      }),
    );
    if (!event) throw new Error('the event did not decode');
    expect(execItemOf(event.kind, event)).toEqual({ stream: 'stdout', line: '', seq: 2 });
  });

  it('is not output for any other event (started, completed, result)', () => {
    for (const kind of ['started', 'completed', 'result', 'error'])
      expect(execItemOf(kind, {})).toBeUndefined();
  });
});
