import { describe, expect, it } from 'vitest';
import { parseCommandLine } from './flags.js';

describe('parseCommandLine', () => {
  it('parses a command, its argument and its flags', () => {
    expect(parseCommandLine(['submit', 'job.yaml', '-f', '--namespace', 'ns'])).toEqual({
      command: 'submit',
      args: ['job.yaml'],
      values: { follow: true, namespace: 'ns' },
    });
    expect(parseCommandLine(['--redis-url', 'redis://x:1', 'ls', '--state', 'queued'])).toMatchObject({
      command: 'ls',
      args: [],
      values: { 'redis-url': 'redis://x:1', state: 'queued' },
    });
  });

  it('refuses an unknown flag by name and suggests the nearest', () => {
    expect(() => parseCommandLine(['status', 'j', '--namespce', 'x'])).toThrow(
      'unknown flag --namespce (did you mean --namespace?)',
    );
    expect(() => parseCommandLine(['submit', 'j.yaml', '--folow'])).toThrow(
      'unknown flag --folow (did you mean --follow?)',
    );
    expect(() => parseCommandLine(['ls', '--zzzzzz'])).toThrow(/^unknown flag --zzzzzz$/);
    expect(() => parseCommandLine(['ls', '-x'])).toThrow(/^unknown flag -x$/);
  });

  it("refuses another command's flag instead of ignoring it", () => {
    expect(() => parseCommandLine(['submit', 'j.yaml', '--json'])).toThrow('--json does not apply to submit');
    expect(() => parseCommandLine(['status', 'j', '-f'])).toThrow('-f does not apply to status');
  });

  it('refuses an unknown command, a missing value and extra arguments', () => {
    expect(() => parseCommandLine(['stauts', 'j'])).toThrow(
      'unknown command "stauts" (did you mean status?)',
    );
    expect(() => parseCommandLine(['status', 'j', '--namespace'])).toThrow(/argument missing/);
    expect(() => parseCommandLine(['status', 'a', 'b'])).toThrow('unexpected argument "b"');
  });
});
