/** Most bytes of an HTTP request head the egress proxy reads before it gives up on a Host. */
export const HTTP_HEAD_MAX = 16 * 1024;

/**
 * The host name a plain HTTP request names in its Host header (port and trailing dot dropped),
 * read from the request head without parsing the rest: `undefined` while the head is not
 * complete, `null` when it is complete (or too long) and names no host.
 */
export function httpRequestHost(data: Buffer): string | null | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return data.length >= HTTP_HEAD_MAX ? null : undefined;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'host') {
      const value = line
        .slice(colon + 1)
        .trim()
        .toLowerCase();
      const host = value.startsWith('[')
        ? value.slice(0, value.indexOf(']') + 1)
        : value.replace(/:\d+$/, '');
      return host.replace(/\.$/, '') || null;
    }
  }
  return null;
}
