import type { StepEvent } from './step-event.js';

/**
 * The stream field that holds the event's JSON: `XADD key MAXLEN ~ N * event '{…}'`.
 *
 * An entry may hold several events, the field repeated in seq order
 * (`XADD key MAXLEN ~ N * event '{…}' event '{…}'`): the agent packs lines so when its output is
 * faster than its share of the sandbox's Redis rate limit (agent/src/write-pace.ts). Readers of
 * output use decodeEventEntry, which returns all of them.
 */
export const EVENT_FIELD = 'event';

export function encodeEvent(event: StepEvent): [typeof EVENT_FIELD, string] {
  return [EVENT_FIELD, JSON.stringify(event)];
}
