import { describe, expect, it } from 'vitest';
import { parseSpecText } from './load-spec-file.js';

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
});
