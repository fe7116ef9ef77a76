/**
 * Connect's streaming protocol over HTTP/1.1, JSON codec: each message is an envelope (one flags
 * byte, a 4-byte big-endian length, the JSON), the last one flagged 0x02 carries the end of the
 * stream (`{}` or `{ error }`). The e2b SDK's process and watch calls are server streams.
 */
export const END_STREAM = 0x02;

export function envelope(flags: number, json: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(json));
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}
