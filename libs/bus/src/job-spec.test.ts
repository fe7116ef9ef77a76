import { Limits } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { JobSpecError, materializeSteps, parseJobSpec, safeParseJobSpec } from './job-spec.js';

/** The issues of a spec that must be refused. */
function issuesOf(input: unknown): string[] {
  const parsed = safeParseJobSpec(input);
  expect(parsed.ok).toBe(false);
  return parsed.ok ? [] : parsed.issues;
}

describe('job spec', () => {
  it('fills defaults and makes a bare step a run step', () => {
    const spec = parseJobSpec({ image: 'debian:bookworm', steps: [{ command: 'echo', args: ['hi'] }] });
    expect(spec.tenant).toBe('default');
    expect(spec.priority).toBe(50);
    expect(spec.timeoutSeconds).toBe(3600);
    expect(spec.steps[0]).toMatchObject({ kind: 'run', command: 'echo', continueOnError: false });
  });

  it('refuses with the field path and the rule, prefixed by the source', () => {
    const parsed = safeParseJobSpec(
      {
        id: 'bad id!',
        tenant: 'Acme',
        image: 'x',
        steps: [{ kind: 'run', command: '' }, { kind: 'readFile' }],
        priority: 500,
      },
      'job.json',
    );
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error.startsWith('job.json: invalid job spec:')).toBe(true);
    expect(parsed.error).toContain('id: job id may contain only');
    expect(parsed.error).toContain('tenant: tenant may contain only lower-case');
    expect(parsed.error).toContain('steps.0.command: command must not be empty');
    expect(parsed.error).toContain('steps.1.path');
    expect(parsed.error).toContain('priority: priority is at most 100');
  });

  it('needs a template or an image, and at least one step', () => {
    expect(() => parseJobSpec({ steps: [] })).toThrow(JobSpecError);
    const parsed = safeParseJobSpec({ steps: [] });
    expect(parsed.ok ? '' : parsed.error).toContain('steps: a job needs at least one step');
    const noImage = safeParseJobSpec({ steps: [{ command: 'true' }] });
    expect(noImage.ok ? '' : noImage.error).toContain('image: a job needs a template or an image');
  });

  it('refuses a shutdown step (the services send it) and a step timeout past the wire limit', () => {
    const parsed = safeParseJobSpec({
      image: 'x',
      steps: [{ kind: 'shutdown' }, { command: 'sleep', timeoutSeconds: 10 ** 9 }],
    });
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error).toContain('steps.0.kind');
    expect(parsed.error).toContain('steps.1.timeoutSeconds: timeoutSeconds is at most 86400');
  });

  it('materializes wire steps with ids assigned and orchestration fields split off', () => {
    const spec = parseJobSpec({
      image: 'x',
      steps: [
        { command: 'make', continueOnError: true, timeoutSeconds: 5, name: 'build' },
        { kind: 'readFile', path: 'out.txt', timeoutSeconds: 2 },
      ],
    });
    const steps = materializeSteps(spec);
    expect(steps.map((s) => s.step.stepId)).toEqual(['step-1', 'step-2']);
    expect(steps[0]).toMatchObject({ continueOnError: true, timeoutSeconds: 5, name: 'build' });
    expect(steps[0]?.step).toMatchObject({
      schemaVersion: 1,
      kind: 'run',
      command: 'make',
      timeoutSeconds: 5,
    });
    expect(steps[0]?.step).not.toHaveProperty('continueOnError');
    expect(steps[1]?.step).toMatchObject({ kind: 'readFile', path: 'out.txt' });
    expect(steps[1]?.timeoutSeconds).toBe(2);
  });
});

describe('unknown keys', () => {
  it('refuses a misspelt key anywhere, naming it and the nearest valid one', () => {
    const issues = issuesOf({
      image: 'x',
      timeoutSecond: 60,
      resources: { limits: { cpus: '1' } },
      steps: [
        { command: 'false', contineOnError: true },
        { command: 'pwd', workdir: '/src' },
        { kind: 'readFile', path: 'a', encodin: 'utf8' },
        { kind: 'writeFile', path: 'a', content: '', mod: 420 },
        { kind: 'listFiles', maxDept: 2 },
        { kind: 'grep', pattern: 'x', ignorecase: true },
      ],
      traceContext: { traceparent: 'x', tracestat: 'y' },
    });
    expect(issues).toEqual(
      expect.arrayContaining([
        'timeoutSecond: unknown key "timeoutSecond" (did you mean "timeoutSeconds"?)',
        'resources.limits.cpus: unknown key "cpus" (did you mean "cpu"?)',
        'steps.0.contineOnError: unknown key "contineOnError" (did you mean "continueOnError"?)',
        'steps.1.workdir: unknown key "workdir" (did you mean "workingDirectory"?)',
        'steps.2.encodin: unknown key "encodin"',
        'steps.3.mod: unknown key "mod" (did you mean "mode"?)',
        'steps.4.maxDept: unknown key "maxDept" (did you mean "maxDepth"?)',
        'steps.5.ignorecase: unknown key "ignorecase" (did you mean "ignoreCase"?)',
        'traceContext.tracestat: unknown key "tracestat" (did you mean "tracestate"?)',
      ]),
    );
    expect(issues).toHaveLength(9);
  });

  it('takes secrets by name only: a value, or a misspelt reference, is refused by field', () => {
    expect(
      parseJobSpec({
        image: 'x',
        secretEnv: { TOKEN: { secretName: 'git-token' } },
        steps: [{ command: 'true' }],
      }).secretEnv,
    ).toEqual({ TOKEN: { secretName: 'git-token', key: 'value' } });
    expect(issuesOf({ image: 'x', secretEnv: { TOKEN: 'hunter2' }, steps: [{ command: 'true' }] })).toEqual([
      expect.stringMatching(/^secretEnv\.TOKEN: /),
    ]);
    expect(
      issuesOf({ image: 'x', secretEnv: { TOKEN: { secretname: 'x' } }, steps: [{ command: 'true' }] }),
    ).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/unknown key "secretname" \(did you mean "secretName"\?\)/),
      ]),
    );
  });

  it('points a top-level working directory at the steps', () => {
    expect(issuesOf({ image: 'x', workdir: '/src', steps: [{ command: 'true' }] })).toEqual([
      'workdir: unknown key "workdir" (a working directory is set per step (steps[].workingDirectory) or in the template)',
    ]);
  });

  it('still accepts a stored spec read back (defaults filled)', () => {
    const spec = parseJobSpec({ image: 'x', steps: [{ command: 'true' }, { kind: 'grep', pattern: 'p' }] });
    expect(parseJobSpec(JSON.parse(JSON.stringify(spec)))).toEqual(spec);
  });
});

describe('sizes at submit', () => {
  const MiB = 1024 * 1024;

  it('refuses a step whose args total 50 MB, naming the step and its size on the wire', () => {
    const arg = 'a'.repeat(100 * 1024);
    const args = Array.from({ length: 500 }, () => arg);
    const refused = (() => {
      try {
        parseJobSpec({ image: 'x', steps: [{ command: 'true' }, { command: 'echo', args }] });
      } catch (err) {
        return err;
      }
    })();
    expect(refused).toBeInstanceOf(JobSpecError);
    expect((refused as JobSpecError).issues).toEqual([
      expect.stringMatching(
        /^steps\.1: the step is 51,2\d\d,\d{3} bytes on the wire, over the limit of 16,777,216$/,
      ),
    ]);
  });

  it('measures a step that also broke another rule without throwing', () => {
    expect(issuesOf({ image: 'x', steps: [{ kind: 'grep', pattern: 'x', maxMatches: 10 ** 9 }] })).toEqual([
      'steps.0.maxMatches: maxMatches is at most 10000',
    ]);
  });

  it('accepts a step just under the wire limit', () => {
    const content = 'c'.repeat(Limits.writeFileMaxBytes);
    expect(safeParseJobSpec({ image: 'x', steps: [{ kind: 'writeFile', path: 'f', content }] }).ok).toBe(
      true,
    );
  });

  it('bounds each string: an argument, an environment name or value, in UTF-8 bytes', () => {
    const big = 'é'.repeat(Limits.stringMaxBytes / 2 + 1); // fewer characters than the limit, more bytes
    const issues = issuesOf({
      image: 'x',
      env: { A: big },
      steps: [{ command: 'echo', args: ['ok', big], env: { [big]: 'v' } }],
    });
    expect(issues.sort()).toEqual([
      'env.A: an environment value is 131,074 bytes, over the limit of 131,072',
      'steps.0.args.1: an argument is 131,074 bytes, over the limit of 131,072',
      `steps.0.env.${'é'.repeat(64)}…: an environment name is 131,074 bytes, over the limit of 131,072`,
    ]);
  });

  it('refuses writeFile content over the agent limit once decoded', () => {
    const over = Buffer.alloc(Limits.writeFileMaxBytes + 1).toString('base64');
    expect(
      issuesOf({ image: 'x', steps: [{ kind: 'writeFile', path: 'f', content: over, encoding: 'base64' }] }),
    ).toEqual(['steps.0.content: content is 10,485,761 bytes, over the limit of 10,485,760']);
  });

  it('refuses a whole spec over 32 MiB even when each step fits', () => {
    const content = 'c'.repeat(9 * MiB);
    const steps = Array.from({ length: 4 }, (_, i) => ({ kind: 'writeFile', path: `f${i}`, content }));
    expect(issuesOf({ image: 'x', steps })).toEqual([
      expect.stringMatching(/^the job spec is 37,74\d,\d{3} bytes, over the limit of 33,554,432$/),
    ]);
  });
});

describe('NUL bytes (issue 27 §6)', () => {
  // The kernel ends a path, a program, an argument or an environment entry at a NUL: refused at
  // submit with its field named, not when the step runs.
  it.each([
    ['command', { command: 'ec\0ho' }, 'steps.0.command: command must not contain a NUL byte (\\0)'],
    ['an argument', { command: 'echo', args: ['a', 'b\0'] }, 'steps.0.args.1: an argument must not contain'],
    [
      'an environment name',
      { command: 'echo', env: { 'X\0Y': 'v' } },
      'steps.0.env."X\\u0000Y": an environment name must not contain',
    ],
    ['an environment value', { command: 'echo', env: { X: 'v\0' } }, 'steps.0.env.X: an environment value'],
    [
      'workingDirectory',
      { command: 'echo', workingDirectory: '/t\0' },
      'steps.0.workingDirectory: workingDirectory',
    ],
    ['a readFile path', { kind: 'readFile', path: 'a\0' }, 'steps.0.path: path must not contain'],
    [
      'a writeFile path',
      { kind: 'writeFile', path: 'a\0', content: 'x' },
      'steps.0.path: path must not contain',
    ],
    ['a listFiles path', { kind: 'listFiles', path: 'a\0' }, 'steps.0.path: path must not contain'],
    ['a grep path', { kind: 'grep', pattern: 'x', path: 'a\0' }, 'steps.0.path: path must not contain'],
  ])('refuses one in %s', (_what, step, issue) => {
    expect(issuesOf({ image: 'x', steps: [step] }).join('\n')).toContain(issue);
  });

  it("refuses one in the sandbox's environment", () => {
    expect(issuesOf({ image: 'x', env: { A: 'b\0' }, steps: [{ command: 'true' }] })).toEqual([
      'env.A: an environment value must not contain a NUL byte (\\0)',
    ]);
  });
});
