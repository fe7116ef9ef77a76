import { describe, expect, it } from 'vitest';
import {
  EventType,
  encodeSpawn,
  FrameReader,
  MAX_EVENT_FRAME_BYTES,
  type SpawnerEvent,
  SpawnerProtocolError,
} from './spawner-protocol.js';

/** An event frame as the helper writes it. */
function frame(type: number, id: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUInt32LE(5 + payload.length, 0);
  head.writeUInt8(type, 4);
  head.writeUInt32LE(id, 5);
  return Buffer.concat([head, payload]);
}

function collect(): { reader: FrameReader; seen: { type: number; id: number; payload: string }[] } {
  const seen: { type: number; id: number; payload: string }[] = [];
  // Copied: a payload is a view valid only during the call.
  const reader = new FrameReader((e: SpawnerEvent) =>
    seen.push({ type: e.type, id: e.id, payload: e.payload.toString('latin1') }),
  );
  return { reader, seen };
}

const stream = Buffer.concat([
  frame(EventType.spawned, 1, Buffer.from([0x39, 0x30, 0, 0])),
  frame(EventType.stdout, 1, Buffer.from('hello\nworld\n')),
  frame(EventType.stdoutEnd, 1, Buffer.alloc(0)),
  frame(EventType.exit, 7, Buffer.from([0, 0, 0, 0])),
]);

describe('FrameReader', () => {
  it('reads the same events however the stream is cut, a length field split included', () => {
    const whole = collect();
    whole.reader.push(stream);
    expect(whole.seen.map((e) => e.type)).toEqual([
      EventType.spawned,
      EventType.stdout,
      EventType.stdoutEnd,
      EventType.exit,
    ]);
    expect(whole.seen[1]?.payload).toBe('hello\nworld\n');
    for (let cut = 1; cut < stream.length; cut++) {
      for (const size of [1, 2, 3, 5]) {
        const parts = collect();
        parts.reader.push(stream.subarray(0, cut));
        for (let at = cut; at < stream.length; at += size) parts.reader.push(stream.subarray(at, at + size));
        expect(parts.seen).toEqual(whole.seen);
      }
    }
  });

  it('throws on an impossible length and ignores everything after it', () => {
    const { reader, seen } = collect();
    const bad = Buffer.alloc(9);
    bad.writeUInt32LE(MAX_EVENT_FRAME_BYTES + 1, 0);
    expect(() => reader.push(bad)).toThrow(SpawnerProtocolError);
    reader.push(stream);
    expect(seen).toEqual([]);
  });

  it('ignores the rest of the stream once the handler rejects a frame', () => {
    let calls = 0;
    const reader = new FrameReader(() => {
      calls++;
      throw new Error('unknown event type 99');
    });
    expect(() => reader.push(stream)).toThrow(/unknown event type/);
    reader.push(stream);
    expect(calls).toBe(1);
  });
});

describe('encodeSpawn', () => {
  it('lays out file, cwd, argv and env as length-prefixed strings after the header', () => {
    const buf = encodeSpawn(42, { file: 'ls', cwd: '/tmp', argv: ['ls', '-l'], env: ['A=é'] });
    expect(buf.readUInt32LE(0)).toBe(buf.length - 4);
    expect(buf.readUInt8(4)).toBe(1);
    expect(buf.readUInt32LE(5)).toBe(42);
    const strings: string[] = [];
    let at = 9;
    const str = () => {
      const n = buf.readUInt32LE(at);
      strings.push(buf.toString('utf8', at + 4, at + 4 + n));
      at += 4 + n;
    };
    str();
    str();
    expect(buf.readUInt32LE(at)).toBe(2);
    at += 4;
    str();
    str();
    expect(buf.readUInt32LE(at)).toBe(1);
    at += 4;
    str();
    expect(at).toBe(buf.length);
    expect(strings).toEqual(['ls', '/tmp', 'ls', '-l', 'A=é']);
  });

  it('refuses a request larger than the helper accepts, naming the limit', () => {
    expect(() =>
      encodeSpawn(1, { file: 'x', cwd: '/', argv: ['x', 'y'.repeat(17 * 1024 * 1024)], env: [] }),
    ).toThrow(/at most 16777216 can be started/);
  });
});
