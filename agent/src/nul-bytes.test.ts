import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deleteKeys, popResult, pushStep, startAgent, stopAgent } from './testing/agent-harness.js';
import { useTestRedis } from './testing/test-redis.js';

// Issue 27 §6: a step with a NUL byte where the kernel takes a C string (a program, an argument,
// an environment name or value, a path) is refused at submit; one that reaches the agent anyway
// (a producer writing the wire by hand) gets an invalid_step result naming the field, and the
// agent goes on with the next step.

const { redis, cleanups } = useTestRedis();

/** Raw wire steps, as JSON text: `\u0000` is the NUL. */
const STEPS: [string, string, string][] = [
  ['command', '"command":"ec\\u0000ho"', 'command: command must not contain a NUL byte'],
  [
    'an argument',
    '"command":"echo","args":["a","b\\u0000"]',
    'args.1: an argument must not contain a NUL byte',
  ],
  [
    'an environment name',
    '"command":"echo","env":{"X\\u0000Y":"v"}',
    'env."X\\u0000Y": an environment name must not contain a NUL byte',
  ],
  [
    'an environment value',
    '"command":"echo","env":{"X":"v\\u0000"}',
    'env.X: an environment value must not contain a NUL byte',
  ],
  [
    'workingDirectory',
    '"command":"echo","workingDirectory":"/t\\u0000mp"',
    'workingDirectory: workingDirectory must not contain a NUL byte',
  ],
  ['a readFile path', '"kind":"readFile","path":"a\\u0000b"', 'path: path must not contain a NUL byte'],
  [
    'a writeFile path',
    '"kind":"writeFile","path":"a\\u0000b","content":"x"',
    'path: path must not contain a NUL byte',
  ],
  ['a listFiles path', '"kind":"listFiles","path":"a\\u0000b"', 'path: path must not contain a NUL byte'],
  ['a grep path', '"kind":"grep","pattern":"x","path":"a\\u0000b"', 'path: path must not contain a NUL byte'],
];

describe('agent: NUL bytes in a step', () => {
  it('answers each with an invalid_step result naming the field, then runs the next step', async () => {
    const workdir = mkdtempSync(join(tmpdir(), 'sandstream-nul-'));
    const agent = startAgent({ extraArgs: ['--workdir', workdir] });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
      async () => rmSync(workdir, { recursive: true, force: true }),
    );
    for (const [i, [, fields]] of STEPS.entries()) {
      await pushStep(redis, agent.keys, `{"schemaVersion":1,"stepId":"nul-${i}",${fields}}`);
    }
    await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: 'after', command: 'echo', args: ['ok'] });
    for (const [i, [what, , message]] of STEPS.entries()) {
      const result = await popResult(redis, agent.keys);
      expect(result.stepId, what).toBe(`nul-${i}`);
      expect(result.errorCode, what).toBe('invalid_step');
      expect(result.errorMessage, what).toContain(message);
      // Nothing of the host's directories in the answer.
      expect(result.errorMessage, what).not.toContain(workdir);
    }
    expect(await popResult(redis, agent.keys)).toMatchObject({ stepId: 'after', exitCode: 0 });
  });
});
