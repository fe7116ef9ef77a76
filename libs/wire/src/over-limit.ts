/** Bytes as people read them in an error: 52,428,912. */
export function formatBytes(bytes: number): string {
  return bytes.toLocaleString('en-US');
}

/** `the step is 52,428,912 bytes on the wire, over the limit of 16,777,216` (`where`: " on the wire"). */
export function overLimit(what: string, bytes: number, limit: number, where = ''): string {
  return `${what} is ${formatBytes(bytes)} bytes${where}, over the limit of ${formatBytes(limit)}`;
}
