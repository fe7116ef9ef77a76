/**
 * The server name a TLS ClientHello asks for (its SNI extension), read without terminating TLS:
 * the egress proxy decides on it and then relays the very bytes it read. Returns `undefined`
 * while more bytes are needed, `null` when the bytes are no ClientHello or carry no name.
 */
export function clientHelloServerName(data: Buffer): string | null | undefined {
  if (data.length < 5) return undefined;
  // A TLS record of type handshake (22), version 3.x.
  if (data[0] !== 0x16 || data[1] !== 3) return null;
  const recordLength = data.readUInt16BE(3);
  if (data.length < 5 + recordLength) return undefined;
  const hello = data.subarray(5, 5 + recordLength);
  // Handshake type 1 (ClientHello) whose body fits in this first record (every real client's does).
  if (hello.length < 4 || hello[0] !== 1) return null;
  const bodyLength = hello.readUIntBE(1, 3);
  if (4 + bodyLength > hello.length) return null;
  let at = 4 + 2 + 32; // version, random
  const need = (n: number) => at + n <= 4 + bodyLength;
  if (!need(1)) return null;
  at += 1 + (hello[at] as number); // session id
  if (!need(2)) return null;
  at += 2 + hello.readUInt16BE(at); // cipher suites
  if (!need(1)) return null;
  at += 1 + (hello[at] as number); // compression methods
  if (!need(2)) return null;
  const extensionsEnd = at + 2 + hello.readUInt16BE(at);
  at += 2;
  if (extensionsEnd > 4 + bodyLength) return null;
  while (at + 4 <= extensionsEnd) {
    const type = hello.readUInt16BE(at);
    const length = hello.readUInt16BE(at + 2);
    at += 4;
    if (at + length > extensionsEnd) return null;
    if (type === 0) {
      // server_name: a list of (type, name); type 0 is a host name.
      let entry = at + 2;
      const listEnd = at + 2 + hello.readUInt16BE(at);
      while (entry + 3 <= listEnd) {
        const nameLength = hello.readUInt16BE(entry + 1);
        if (hello[entry] === 0) return hello.subarray(entry + 3, entry + 3 + nameLength).toString('ascii');
        entry += 3 + nameLength;
      }
      return null;
    }
    at += length;
  }
  return null;
}
