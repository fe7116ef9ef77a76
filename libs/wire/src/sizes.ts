import * as z from 'zod';
import { Limits } from './limits.js';
import { overLimit } from './over-limit.js';

export * from './over-limit.js';

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
