/**
 * `docker logs` of a container without a TTY comes multiplexed: frames of an 8-byte header
 * (stream id, 3 zero bytes, big-endian length) followed by the payload. Both streams are joined in
 * order, as `kubectl logs` shows them.
 */
export function demuxDockerLog(buffer: Buffer): string {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const length = buffer.readUInt32BE(offset + 4);
    parts.push(buffer.subarray(offset + 8, offset + 8 + length));
    offset += 8 + length;
  }
  return Buffer.concat(parts).toString('utf8');
}

/** tailLines / limitBytes as the pods/log endpoint applies them. */
export function cutLog(text: string, tailLines: number | undefined, limitBytes: number | undefined): string {
  let result = text;
  if (tailLines !== undefined) {
    const lines = result.split('\n');
    const trailing = lines.at(-1) === '' ? lines.pop() : undefined;
    result =
      lines.slice(Math.max(0, lines.length - tailLines)).join('\n') + (trailing !== undefined ? '\n' : '');
  }
  if (limitBytes !== undefined) result = Buffer.from(result).subarray(0, limitBytes).toString('utf8');
  return result;
}
