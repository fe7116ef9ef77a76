import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RunStepSchema } from './step.js';
import { describeUnknownKeys, nearestKey, strictObject } from './unknown-keys.js';
import { formatIssues } from './zod-errors.js';

describe('nearestKey', () => {
  const step = [
    'kind',
    'command',
    'args',
    'shell',
    'workingDirectory',
    'env',
    'timeoutSeconds',
    'continueOnError',
  ];

  it.each([
    ['contineOnError', 'continueOnError'],
    ['timeoutSecond', 'timeoutSeconds'],
    ['TimeoutSeconds', 'timeoutSeconds'],
    ['comand', 'command'],
    ['arg', 'args'],
    ['workdir', 'workingDirectory'],
    ['timeout', 'timeoutSeconds'],
  ])('suggests %s → %s', (typed, meant) => {
    expect(nearestKey(typed, step)).toBe(meant);
  });

  it('suggests nothing when nothing is close', () => {
    expect(nearestKey('secretEnv', step)).toBeUndefined();
    expect(nearestKey('xy', step)).toBeUndefined();
    expect(nearestKey('anything', [])).toBeUndefined();
  });
});

describe('strict objects at the edges', () => {
  const Outer = strictObject(
    {
      timeoutSeconds: z.number().optional(),
      inner: strictObject({ cpu: z.string().optional(), memory: z.string().optional() }).optional(),
    },
    { secretEnv: 'secrets belong in a template' },
  );

  it('names the unknown key at its own path and suggests the nearest valid one', () => {
    const parsed = Outer.safeParse({ timeoutSecond: 5, inner: { cpus: '1' } });
    expect(parsed.success).toBe(false);
    expect(
      formatIssues(parsed.error as z.ZodError)
        .split('; ')
        .sort(),
    ).toEqual([
      'inner.cpus: unknown key "cpus" (did you mean "cpu"?)',
      'timeoutSecond: unknown key "timeoutSecond" (did you mean "timeoutSeconds"?)',
    ]);
  });

  it('gives the schema hint instead of a guess, and lists several keys on their object', () => {
    const parsed = Outer.safeParse({ secretEnv: {}, zzzzzz: 1 });
    expect(formatIssues(parsed.error as z.ZodError)).toBe(
      'unknown keys "secretEnv" (secrets belong in a template), "zzzzzz"',
    );
  });

  it('suggests the keys of a schema derived by extend and omit', () => {
    const Derived = Outer.omit({ inner: true }).extend({ continueOnError: z.boolean().optional() });
    const parsed = Derived.safeParse({ contineOnError: true });
    expect(formatIssues(parsed.error as z.ZodError)).toBe(
      'contineOnError: unknown key "contineOnError" (did you mean "continueOnError"?)',
    );
  });

  it('leaves the wire schemas lenient', () => {
    const step = { schemaVersion: 1, stepId: 's', kind: 'run', command: 'true', future: 1 };
    expect(RunStepSchema.safeParse(step).success).toBe(true);
  });

  it('quotes odd keys so the message stays one readable line', () => {
    expect(describeUnknownKeys(['a"b\n'], ['ab'])).toBe('unknown key "a\\"b\\n" (did you mean "ab"?)');
  });
});
