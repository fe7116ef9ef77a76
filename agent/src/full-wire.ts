import type { ControlMessage, Decoded, Step } from '@sandstream/wire';
import { fastDecodeControlMessage, fastDecodeStep } from '@sandstream/wire/lean';

/**
 * The wire's schemas (zod), loaded on first need: for a message the zod-free fast decoders of
 * `@sandstream/wire/lean` are not sure of (an invalid step, an odd cancel), whose refusal the
 * schema words. Nothing else in the agent loads zod, so its single executable's start-up heap
 * holds no schema; the bundle keeps this code unrun until then (docs/benchmarks.md, "Idle agent
 * memory, part 3"). Loading it costs a few milliseconds once, on the first such message.
 */
export type FullWire = typeof import('@sandstream/wire');

let loading: Promise<FullWire> | undefined;

export function fullWire(): Promise<FullWire> {
  loading ??= import('@sandstream/wire');
  return loading;
}

/** A raw step decoded as the wire's decodeStep does: without zod when the fast decoder is sure. */
export async function decodeStep(raw: string): Promise<Decoded<Step>> {
  const step = fastDecodeStep(raw);
  return step ? { ok: true, value: step } : (await fullWire()).decodeStep(raw);
}

/** A raw control message decoded as the wire's decodeControlMessage does, zod only when unsure. */
export async function decodeControlMessage(raw: string): Promise<Decoded<ControlMessage>> {
  const message = fastDecodeControlMessage(raw);
  return message ? { ok: true, value: message } : (await fullWire()).decodeControlMessage(raw);
}
