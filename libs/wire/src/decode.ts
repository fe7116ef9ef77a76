import type * as z from 'zod';
import { type ControlMessage, ControlMessageSchema } from './control.js';
import { Limits } from './limits.js';
import { peekStepId } from './peek-step-id.js';
import { overLimit } from './sizes.js';
import { type Step, StepSchema } from './step.js';
import { formatIssues } from './zod-errors.js';

export type Decoded<T> = { ok: true; value: T } | { ok: false; stepId: string | null; error: string };

/**
 * Parses a raw wire message. Never throws: anything wrong (not JSON, too large, unknown kind,
 * missing or mistyped field, unsupported schemaVersion) becomes `{ ok: false }` with a message
 * naming the field, plus the stepId when one could be read, so the reader can answer it.
 */
function decodeWith<T>(schema: z.ZodType<T>, raw: string, what: string): Decoded<T> {
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes > Limits.messageMaxBytes) {
    // Too large to parse, but its id is read from its start so the answer can be matched.
    return { ok: false, stepId: peekStepId(raw), error: overLimit(what, bytes, Limits.messageMaxBytes) };
  }
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    return { ok: false, stepId: null, error: `${what} is not valid JSON: ${(err as Error).message}` };
  }
  const stepId = readStepId(json);
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    return { ok: false, stepId, error: `${what} must be a JSON object` };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) return { ok: false, stepId, error: `invalid ${what}: ${formatIssues(parsed.error)}` };
  return { ok: true, value: parsed.data };
}

function readStepId(json: unknown): string | null {
  if (json === null || typeof json !== 'object') return null;
  const id = (json as { stepId?: unknown }).stepId;
  return typeof id === 'string' && id.length > 0 && id.length <= 256 ? id : null;
}

export function decodeStep(raw: string): Decoded<Step> {
  return decodeWith(StepSchema, raw, 'step');
}

export function decodeControlMessage(raw: string): Decoded<ControlMessage> {
  return decodeWith(ControlMessageSchema, raw, 'control message');
}
