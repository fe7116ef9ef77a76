import { describe, expect, it } from 'vitest';
import { parseSpecText, SPEC_FILE_MAX_DEPTH, SpecFileError } from './load-spec-file.js';

/** The SpecFileError a text is refused with (the CLI maps SpecFileError to a usage error, exit 2). */
function refusal(text: string, path = 'job.yaml'): SpecFileError {
  try {
    parseSpecText(text, path);
  } catch (err) {
    expect(err).toBeInstanceOf(SpecFileError);
    return err as SpecFileError;
  }
  throw new Error('the text was accepted');
}

describe('job files', () => {
  it('parses a valid file with defaults filled', () => {
    const spec = parseSpecText('image: debian\nsteps:\n  - command: echo\n    args: [hi]\n', 'job.yaml');
    expect(spec).toMatchObject({
      tenant: 'default',
      priority: 50,
      steps: [{ kind: 'run', command: 'echo' }],
    });
  });

  it('names the file, line, field and rule of each broken field', () => {
    const text = [
      'image: debian',
      'priority: 500',
      'steps:',
      '  - command: echo',
      '  - kind: grep',
      '    pattern: x',
      '    maxMatches: 999999',
    ].join('\n');
    expect(() => parseSpecText(text, 'job.yaml')).toThrow(
      /job\.yaml:2:\d+: priority: priority is at most 100\njob\.yaml:7:\d+: steps\.1\.maxMatches: maxMatches is at most 10000/,
    );
  });

  it('reports YAML syntax errors with their position', () => {
    expect(() => parseSpecText('image: [unclosed\nsteps: x', 'bad.yaml')).toThrow(
      /bad\.yaml:\d+:\d+: not valid YAML/,
    );
  });

  it('points at the parent when a required field is missing', () => {
    expect(() => parseSpecText('image: debian\nsteps:\n  - kind: readFile\n', 'j.yaml')).toThrow(
      /j\.yaml:3:\d+: steps\.0\.path/,
    );
  });

  it('names an unknown key on its line, with the nearest valid key', () => {
    const text = [
      'image: debian',
      'timeoutSecond: 60',
      'steps:',
      '  - command: "false"',
      '    contineOnError: true',
    ].join('\n');
    expect(refusal(text).message).toBe(
      [
        'job.yaml:2:1: timeoutSecond: unknown key "timeoutSecond" (did you mean "timeoutSeconds"?)',
        'job.yaml:5:5: steps.0.contineOnError: unknown key "contineOnError" (did you mean "continueOnError"?)',
      ].join('\n'),
    );
  });
});

describe('hostile job files', () => {
  it('refuses a billion-laughs file naming the file and the alias limit', () => {
    const lines = [
      'image: debian',
      'steps: [{ command: "true" }]',
      'a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]',
    ];
    for (const [name, prev] of [
      ['b', 'a'],
      ['c', 'b'],
      ['d', 'c'],
      ['e', 'd'],
      ['f', 'e'],
      ['g', 'f'],
      ['h', 'g'],
    ]) {
      lines.push(`${name}: &${name} [${Array(9).fill(`*${prev}`).join(', ')}]`);
    }
    expect(refusal(lines.join('\n'), 'laughs.yaml').message).toMatch(
      /^laughs\.yaml: its YAML aliases expand past 100 nodes, the limit for a job file/,
    );
  });

  it.each([
    ['100,000 nested [ (JSON is YAML here)', '['.repeat(100_000)],
    ['closed nesting', `{"image": "x", "steps": ${'['.repeat(5000)}${']'.repeat(5000)}}`],
    ['nested block sequences', `${'- '.repeat(100_000)}x\n`],
    ['nested block maps', Array.from({ length: 200 }, (_, i) => `${' '.repeat(i)}a:`).join('\n')],
  ])('refuses %s naming the file and the depth limit', (_name, text) => {
    expect(refusal(text, 'deep.json').message).toBe(
      `deep.json: nested deeper than ${SPEC_FILE_MAX_DEPTH} levels, the limit for a job file`,
    );
  });

  it('accepts aliases and nesting within the limits', () => {
    const text = ['image: debian', 'env: &e { A: "1" }', 'steps:', '  - command: env', '    env: *e'].join(
      '\n',
    );
    expect(parseSpecText(text, 'ok.yaml').steps[0]).toMatchObject({ env: { A: '1' } });
    const nested = `{"image": "x", "steps": [{"command": "x"}], "labels": {}}`;
    expect(parseSpecText(nested, 'ok.json').image).toBe('x');
  });
});
