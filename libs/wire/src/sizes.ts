import * as z from 'zod';
import { Limits } from './limits.js';

/** Bytes as people read them in an error: 52,428,912. */
export function formatBytes(bytes: number): string {
  return bytes.toLocaleString('en-US');
}

/** `the step is 52,428,912 bytes on the wire, over the limit of 16,777,216` (`where`: " on the wire"). */
export function overLimit(what: string, bytes: number, limit: number, where = ''): string {
  return `${what} is ${formatBytes(bytes)} bytes${where}, over the limit of ${formatBytes(limit)}`;
}

/**
 * A string bounded in UTF-8 bytes (what Redis stores and the wire carries), not in UTF-16 units as
 * zod's .max() counts them. `what` names it in the error: "an argument is 200,000 bytes, …".
 */
export function byteBoundedString(what: string, maxBytes: number = Limits.stringMaxBytes) {
  return z.string().superRefine((value, ctx) => {
    // Three bytes per UTF-16 unit at most: short strings need no count.
    if (value.length * 3 <= maxBytes) return;
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > maxBytes) ctx.addIssue({ code: 'custom', message: overLimit(what, bytes, maxBytes) });
  });
}
