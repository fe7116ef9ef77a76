import { describe, expect, it } from 'vitest';
import { parseCommandLine } from './flags.js';

describe('parseCommandLine', () => {
  it('parses a command, its argument and its flags', () => {
    expect(parseCommandLine(['submit', 'job.yaml', '-f', '--namespace', 'ns'])).toEqual({
      command: 'submit',
      args: ['job.yaml'],
      commandLine: [],
      values: { follow: true, namespace: 'ns' },
    });
    expect(parseCommandLine(['--redis-url', 'redis://x:1', 'ls', '--state', 'queued'])).toMatchObject({
      command: 'ls',
      args: [],
      values: { 'redis-url': 'redis://x:1', state: 'queued' },
    });
  });

  it('parses sandbox subcommands and exec with its command line after --', () => {
    expect(parseCommandLine(['sandbox', 'create', 'img', '--label', 'a=1', '--label', 'b=2'])).toMatchObject({
      command: 'sandbox create',
      args: ['img'],
      values: { label: ['a=1', 'b=2'] },
    });
    // Flags before or after the id; everything after -- is the command's, flags included.
    expect(parseCommandLine(['exec', '--shell', 'sb', '--cwd', '/w', '--', 'ls', '-la', '--color'])).toEqual({
      command: 'exec',
      args: ['sb'],
      commandLine: ['ls', '-la', '--color'],
      values: { shell: true, cwd: '/w' },
    });
    expect(() => parseCommandLine(['sandbox', 'create', 'img', '--shell'])).toThrow(
      '--shell does not apply to sandbox create',
    );
    expect(() => parseCommandLine(['status', 'j', '--', 'x'])).toThrow(
      'status takes no command line after --',
    );
    expect(() => parseCommandLine(['sandbox', 'lst'])).toThrow(
      'unknown command "sandbox lst" (did you mean sandbox ls?)',
    );
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
