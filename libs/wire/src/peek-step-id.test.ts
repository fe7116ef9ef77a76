import { describe, expect, it } from 'vitest';
import { decodeControlMessage, decodeStep } from './decode.js';
import { Limits } from './limits.js';
import { peekStepId, STEP_ID_SCAN_CHARS } from './peek-step-id.js';

describe('peekStepId', () => {
  it.each([
    ['{"schemaVersion":1,"stepId":"s-1","command":"x"}', 's-1'],
    [' {\n  "schemaVersion" : 1,\n  "stepId" : "s 2"\n}', 's 2'],
    ['{"kind":"run","stepId":"esc\\"aped\\u0041"}', 'esc"apedA'],
    // Only the top-level key counts, never one inside an argument, a nested object or an array.
    ['{"args":["\\"stepId\\":\\"no\\"","stepId"],"env":{"stepId":"nested"},"stepId":"top"}', 'top'],
    ['{"env":{"stepId":"nested"}}', null],
    ['{"stepId":""}', null],
    ['{"stepId":7}', null],
    [`{"stepId":"${'x'.repeat(257)}"}`, null],
    ['["stepId"]', null],
    ['{"stepId":"unterminated', null],
    ['', null],
  ])('reads %j as %j', (raw, stepId) => {
    expect(peekStepId(raw)).toBe(stepId);
  });

  it('scans only the start of the message', () => {
    const late = `{"args":["${'x'.repeat(STEP_ID_SCAN_CHARS)}"],"stepId":"late"}`;
    expect(peekStepId(late)).toBeNull();
  });
});

describe('an oversized message', () => {
  const huge = 'x'.repeat(Limits.messageMaxBytes);

  it('is refused naming its size, with the stepId read from its start', () => {
    const raw = `{"schemaVersion":1,"stepId":"big","kind":"run","command":"echo","args":["${huge}"]}`;
    const decoded = decodeStep(raw);
    expect(decoded).toMatchObject({ ok: false, stepId: 'big' });
    expect(decoded.ok ? '' : decoded.error).toMatch(
      /^step is 16,777,2\d\d bytes, over the limit of 16,777,216$/,
    );
  });

  it('echoes the stepId of a control message too, and null when the start has none', () => {
    const cancel = `{"schemaVersion":1,"kind":"cancel","stepId":"c1","reason":"${huge}"}`;
    expect(decodeControlMessage(cancel)).toMatchObject({ ok: false, stepId: 'c1' });
    expect(decodeStep(`"${huge}"`)).toMatchObject({ ok: false, stepId: null });
  });
});
