import { describe, expect, it } from 'vitest';
import {
  seedRunStep,
  seedStepEvent,
  seedStepResult,
  smokeEchoStep,
  smokeShutdownStep,
} from './fixtures/seed-000.js';
import {
  decodeControlMessage,
  decodeEventFields,
  decodeStep,
  encodeEvent,
  JobIdSchema,
  StepEventSchema,
  StepResultSchema,
  sandboxKeys,
} from './index.js';

describe('seed fixtures', () => {
  it('accepts the seed run step with every field as printed', () => {
    const decoded = decodeStep(seedRunStep);
    expect(decoded).toEqual({
      ok: true,
      value: {
        schemaVersion: 1,
        stepId: '11111111-1111-1111-1111-111111111111',
        kind: 'run',
        command: 'git',
        args: ['clone', 'https://github.com/foo/bar.git', '.'],
        shell: false,
        workingDirectory: '/work',
        env: null,
        timeoutSeconds: 600,
        // A raw step (seeds/000) runs in FIFO order: parallel is off unless a service marks it.
        parallel: false,
      },
    });
  });

  it('accepts the smoke test steps', () => {
    expect(decodeStep(smokeEchoStep)).toMatchObject({
      ok: true,
      value: { kind: 'run', command: 'echo', args: ['hello'] },
    });
    expect(decodeStep(smokeShutdownStep)).toMatchObject({ ok: true, value: { kind: 'shutdown' } });
  });

  it('defaults kind to run, as seeds/000 says', () => {
    expect(decodeStep('{"schemaVersion":1,"stepId":"a","command":"true"}')).toMatchObject({
      ok: true,
      value: { kind: 'run', args: [], timeoutSeconds: 600 },
    });
  });

  it('reads the seed event (with a seq) and result', () => {
    expect(StepEventSchema.parse({ ...JSON.parse(seedStepEvent), seq: 1 }).line).toBe("Cloning into '.'...");
    expect(StepResultSchema.parse(JSON.parse(seedStepResult)).durationSeconds).toBe(1.23);
  });
});

describe('malformed steps', () => {
  it.each([
    ['not json', '{nope', null, /not valid JSON/],
    ['an array', '[1,2]', null, /JSON object/],
    ['unknown kind', '{"schemaVersion":1,"stepId":"s1","kind":"explode"}', 's1', /kind/],
    ['missing command', '{"schemaVersion":1,"stepId":"s2","kind":"run"}', 's2', /command/],
    ['wrong type', '{"schemaVersion":1,"stepId":"s3","kind":"run","command":"x","args":"y"}', 's3', /args/],
    [
      'unknown major',
      '{"schemaVersion":2,"stepId":"s4","kind":"shutdown"}',
      's4',
      /unsupported schemaVersion 2/,
    ],
    ['missing schemaVersion', '{"stepId":"s5","kind":"shutdown"}', 's5', /schemaVersion/],
    [
      'limit breach',
      '{"schemaVersion":1,"stepId":"s6","kind":"grep","pattern":"x","maxMatches":999999}',
      's6',
      /maxMatches is at most 10000/,
    ],
  ])('%s is an error naming the field, with the stepId when readable', (_name, raw, stepId, message) => {
    const decoded = decodeStep(raw);
    expect(decoded.ok).toBe(false);
    if (decoded.ok) return;
    expect(decoded.stepId).toBe(stepId);
    expect(decoded.error).toMatch(message);
  });

  it('ignores unknown optional fields', () => {
    expect(decodeStep('{"schemaVersion":1,"stepId":"a","kind":"shutdown","future":true}')).toEqual({
      ok: true,
      value: { schemaVersion: 1, stepId: 'a', kind: 'shutdown' },
    });
  });

  it('decodes control messages', () => {
    expect(decodeControlMessage('{"schemaVersion":1,"kind":"cancel","stepId":"x"}').ok).toBe(true);
    expect(decodeControlMessage('{"schemaVersion":1,"kind":"pause","stepId":"x"}').ok).toBe(false);
  });
});

describe('keys and events', () => {
  it('spells keys as seeds/000 (plain) or with a cluster hash tag', () => {
    expect(sandboxKeys('smoke-test').in).toBe('sandbox:smoke-test:in');
    expect(sandboxKeys('j1', 'tagged')).toMatchObject({
      in: 'sandbox:{j1}:in',
      events: 'sandbox:{j1}:events',
      results: 'sandbox:{j1}:results',
      heartbeat: 'sandbox:{j1}:heartbeat',
      control: 'sandbox:{j1}:control',
    });
  });

  it('refuses job ids that would break keys or ACL patterns', () => {
    expect(JobIdSchema.safeParse('job-1.a_b:c').success).toBe(true);
    for (const bad of ['', 'a b', 'a{b}', 'a*', '-lead', 'x'.repeat(129)]) {
      expect(JobIdSchema.safeParse(bad).success, bad).toBe(false);
    }
  });

  it('round-trips an event through stream fields', () => {
    const event = {
      schemaVersion: 1,
      stepId: 's',
      kind: 'stdout' as const,
      seq: 3,
      line: 'hi',
      timestamp: new Date().toISOString(),
    };
    expect(decodeEventFields(encodeEvent(event))).toEqual(event);
    expect(decodeEventFields(['other', 'x'])).toBeNull();
  });
});

describe('StepResult.outputLines', () => {
  const base = JSON.parse(seedStepResult) as Record<string, unknown>;

  it('keeps the line count, and stays optional for results from older agents', () => {
    expect(StepResultSchema.parse({ ...base, outputLines: 1200, droppedLines: 7 })).toMatchObject({
      outputLines: 1200,
      droppedLines: 7,
    });
    expect(StepResultSchema.parse(base).outputLines).toBeUndefined();
  });

  it('refuses a negative or fractional count, naming the field', () => {
    for (const outputLines of [-1, 2.5, '3']) {
      const parsed = StepResultSchema.safeParse({ ...base, outputLines });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path).toEqual(['outputLines']);
    }
  });
});
