import { describe, expect, it } from 'vitest';
import { JobSpecError, materializeSteps, parseJobSpec, safeParseJobSpec } from './job-spec.js';

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
