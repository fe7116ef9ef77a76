import { encodeEvent, SCHEMA_VERSION, type StepEvent } from '@sandstream/wire';

/**
 * The fields of one step event as the agent writes them to a job's events stream (the wire's
 * encoder), for tests that write a stream by hand: a stdout event's line is `<stepId> line <seq>`.
 */
export function stepEventFields(
  stepId: string,
  kind: StepEvent['kind'],
  seq: number,
  extra: Partial<StepEvent> = {},
): ReturnType<typeof encodeEvent> {
  return encodeEvent({
    schemaVersion: SCHEMA_VERSION,
    stepId,
    kind,
    seq,
    timestamp: new Date().toISOString(),
    ...(kind === 'stdout' ? { line: `${stepId} line ${seq}` } : {}),
    ...extra,
  });
}
