import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type CodeOutput, type CodeResult, CodeStepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordingContext } from '../steps/recording-context.js';
import { CodeContexts } from './code-contexts.js';

// The code interpreter's kernels as the agent drives them: one CodeContexts per agent, a
// recording context per cell. Python is the host's Debian python3 (a pyenv one comes first on
// PATH here); JavaScript runs on the node running this test. Plots and DataFrames need
// matplotlib and pandas: covered on Docker with the python template (test/e2e/code-interpreter).
let dir: string;
const contexts = new CodeContexts(1000);
const previousPython = process.env.SANDSTREAM_PYTHON;
beforeAll(async () => {
  dir = await realpath(await mkdtemp(path.join(tmpdir(), 'code-contexts-')));
  process.env.SANDSTREAM_PYTHON = '/usr/bin/python3';
  process.env.SANDSTREAM_NODE = process.execPath;
});
afterAll(async () => {
  contexts.killAll();
  if (previousPython === undefined) delete process.env.SANDSTREAM_PYTHON;
  else process.env.SANDSTREAM_PYTHON = previousPython;
  delete process.env.SANDSTREAM_NODE;
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function cell(code: string, extra: Record<string, unknown> = {}, abortAfterMs?: number) {
  const r = recordingContext(dir);
  const step = CodeStepSchema.parse({ schemaVersion: 1, stepId: `c${++n}`, kind: 'code', code, ...extra });
  if (abortAfterMs !== undefined) setTimeout(() => r.abort.abort(), abortAfterMs);
  const outcome = await contexts.run(step, r.ctx);
  const output = outcome.output as CodeOutput | undefined;
  return { outcome, output, lines: r.lines, stdout: r.text('stdout'), stderr: r.text('stderr') };
}

describe('python contexts', () => {
  it('keep state between cells and answer the last expression as the main result', async () => {
    expect((await cell('x = 40\ndef add(a, b):\n    return a + b')).output?.results).toEqual([]);
    const r = await cell('add(x, 2)');
    expect(r.outcome).toMatchObject({ exitCode: 0, errorMessage: null });
    expect(r.output).toMatchObject({
      kind: 'code',
      language: 'python',
      context: 'default-python',
      error: null,
      stateLost: false,
      results: [{ text: '42', isMainResult: true }],
    });
  });

  it('stream stdout and stderr in the order printed, and a subprocess’s output too', async () => {
    const r = await cell(
      "import sys, subprocess\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')\nsubprocess.run(['echo', 'child'])\nprint('four', end='')",
    );
    expect(r.lines).toEqual([
      { stream: 'stdout', line: 'one' },
      { stream: 'stderr', line: 'two' },
      { stream: 'stdout', line: 'three' },
      { stream: 'stdout', line: 'child' },
      { stream: 'stdout', line: 'four' },
    ]);
    expect(r.output?.results).toEqual([]);
  });

  it('tell each result the cell keeps as it comes, between its lines, by its place in the results', async () => {
    const r = recordingContext(dir);
    const events: string[] = [];
    const ctx = {
      ...r.ctx,
      onLine: (stream: string, line: string) => events.push(`${stream}:${line}`),
      onResult: (index: number, result: CodeResult) =>
        events.push(`result ${index}:${result.text?.slice(0, 3)}`),
    };
    // The third result passes the cell's 8 MiB of results: dropped and counted, never told.
    const step = CodeStepSchema.parse({
      schemaVersion: 1,
      stepId: `c${++n}`,
      kind: 'code',
      code: "display(1)\nprint('mid')\ndisplay('x' * 5_000_000)\ndisplay('y' * 5_000_000)\n3",
    });
    const output = (await contexts.run(step, ctx)).output as CodeOutput;
    expect(events).toEqual(['result 0:1', 'stdout:mid', "result 1:'xx", 'result 2:3']);
    expect(output.results.map((x) => x.text?.slice(0, 3))).toEqual(['1', "'xx", '3']);
    expect(output.droppedResults).toBe(1);
  });

  it('turn _repr_*_ methods into a mimebundle, and display() into further results', async () => {
    const r = await cell(
      [
        'class Rich:',
        "    def _repr_html_(self): return '<b>rich</b>'",
        "    def _repr_markdown_(self): return '**rich**'",
        "    def _repr_png_(self): return b'\\x89PNG'",
        "    def _repr_svg_(self): return '<svg/>'",
        "    def _repr_json_(self): return {'a': [1, 2]}",
        "    def __repr__(self): return 'Rich()'",
        "display('shown')",
        'Rich()',
      ].join('\n'),
    );
    expect(r.output?.results).toEqual([
      { text: "'shown'", isMainResult: false },
      {
        text: 'Rich()',
        html: '<b>rich</b>',
        markdown: '**rich**',
        png: Buffer.from('\x89PNG', 'latin1').toString('base64'),
        svg: '<svg/>',
        json: { a: [1, 2] },
        isMainResult: true,
      },
    ]);
  });

  it('report an exception with its traceback, from the cell’s own lines', async () => {
    const r = await cell('def f():\n    return 1 / 0\nf()');
    expect(r.outcome.exitCode).toBe(1);
    expect(r.output?.error).toMatchObject({ name: 'ZeroDivisionError', value: 'division by zero' });
    expect(r.output?.error?.traceback).toContain('return 1 / 0');
    expect(r.output?.error?.traceback).not.toContain('<string>');
    const syntax = await cell('def (');
    expect(syntax.output?.error?.name).toBe('SyntaxError');
    // The state is still there.
    expect((await cell('x')).output?.results[0]?.text).toBe('40');
  });

  it('interrupt a cell at its timeout and keep the kernel and its state', async () => {
    await cell('import os\npid = os.getpid()\nkept = "yes"');
    const r = await cell("import time\nprint('sleeping')\ntime.sleep(60)", { timeoutSeconds: 1 });
    expect(r.outcome).toMatchObject({ timedOut: true, errorCode: 'timed_out' });
    expect(r.outcome.errorMessage).toContain('keeps its state');
    expect(r.output?.error?.name).toBe('KeyboardInterrupt');
    expect(r.stdout).toEqual(['sleeping']);
    const after = await cell('(kept, pid == os.getpid())');
    expect(after.output).toMatchObject({ stateLost: false, results: [{ text: "('yes', True)" }] });
  });

  it('interrupt a cell on cancel the same way', async () => {
    const r = await cell('import time\ntime.sleep(60)', {}, 300);
    expect(r.outcome).toMatchObject({ cancelled: true, errorCode: 'cancelled' });
    expect((await cell('kept')).output?.results[0]?.text).toBe("'yes'");
  });

  it('kill a cell that ignores the interrupt, and say the state was lost', async () => {
    const r = await cell(
      'import time\nwhile True:\n    try:\n        time.sleep(60)\n    except KeyboardInterrupt:\n        pass',
      { context: 'stubborn', timeoutSeconds: 1 },
    );
    expect(r.outcome).toMatchObject({ timedOut: true });
    expect(r.output).toMatchObject({ stateLost: true, error: { name: 'KernelDied' } });
    expect((await cell('1 + 1', { context: 'stubborn' })).output).toMatchObject({
      stateLost: false,
      results: [{ text: '2' }],
    });
  });

  it('restart a kernel that died between cells and say its state was lost', async () => {
    await cell('y = 1', { context: 'dies' });
    const died = await cell('import os\nos._exit(3)', { context: 'dies' });
    expect(died.output).toMatchObject({ stateLost: true, error: { name: 'KernelDied' } });
    expect(died.output?.error?.value).toContain('exit code 3');
    const next = await cell("'y' in globals()", { context: 'dies' });
    expect(next.output).toMatchObject({ stateLost: false, results: [{ text: 'False' }] });
  });

  it('keep two contexts apart, each in its own working directory', async () => {
    await cell('import os\nsecret = 1', { context: 'one', workingDirectory: '/tmp' });
    const other = await cell("'secret' in globals()", { context: 'two' });
    expect(other.output?.results[0]?.text).toBe('False');
    expect((await cell('os.getcwd()', { context: 'one' })).output?.results[0]?.text).toBe("'/tmp'");
  });

  it('refuse a context of another language by name', async () => {
    const r = await cell('1', { context: 'one', language: 'javascript' });
    expect(r.outcome).toMatchObject({ errorCode: 'invalid_step' });
    expect(r.outcome.errorMessage).toBe('context "one" is a python context, not javascript');
  });
});

describe('javascript contexts', () => {
  it('keep declarations between cells and answer the completion value', async () => {
    await cell('const base = 40; function add(a, b) { return a + b }', { language: 'javascript' });
    const r = await cell('add(base, 2)', { language: 'javascript' });
    expect(r.output).toMatchObject({
      context: 'default-javascript',
      error: null,
      results: [{ text: '42', isMainResult: true }],
    });
    const object = await cell('({ a: [1, 2] })', { language: 'javascript' });
    expect(object.output?.results).toEqual([
      { text: '{ a: [ 1, 2 ] }', json: { a: [1, 2] }, isMainResult: true },
    ]);
  });

  it('await a promise the cell ends with, and stream console output in order', async () => {
    const r = await cell(
      "console.log('one'); console.error('two'); new Promise((resolve) => setTimeout(() => resolve('later'), 50))",
      { language: 'javascript' },
    );
    expect(r.lines).toEqual([
      { stream: 'stdout', line: 'one' },
      { stream: 'stderr', line: 'two' },
    ]);
    expect(r.output?.results).toEqual([{ text: "'later'", isMainResult: true }]);
  });

  it('report a thrown error with its stack', async () => {
    const r = await cell('function boom() { throw new TypeError("bad") }\nboom()', {
      language: 'javascript',
    });
    expect(r.output?.error).toMatchObject({ name: 'TypeError', value: 'bad' });
    expect(r.output?.error?.traceback).toContain('at boom (<cell-');
  });

  it('interrupt a busy loop at its timeout and keep the context', async () => {
    await cell('let kept = "yes"', { language: 'javascript' });
    const r = await cell('while (true) {}', { language: 'javascript', timeoutSeconds: 1 });
    expect(r.outcome).toMatchObject({ timedOut: true });
    expect(r.output).toMatchObject({ stateLost: false });
    expect(r.output?.error?.value).toContain('interrupted');
    expect((await cell('kept', { language: 'javascript' })).output?.results[0]?.text).toBe("'yes'");
    const pending = await cell('new Promise(() => {})', { language: 'javascript', timeoutSeconds: 1 });
    expect(pending.output).toMatchObject({
      stateLost: false,
      error: { value: expect.stringContaining('interrupted') },
    });
  });
});

describe('bash contexts', () => {
  it('keep variables and the directory, report a non-zero status as the error, and survive an interrupt', async () => {
    await cell('cd /tmp; A=1', { language: 'bash' });
    const r = await cell('pwd; echo $A; echo err >&2', { language: 'bash' });
    expect(r.stdout).toEqual(['/tmp', '1']);
    expect(r.stderr).toEqual(['err']);
    expect((await cell('false', { language: 'bash' })).output?.error).toMatchObject({
      name: 'ExitCodeError',
    });
    const slow = await cell('sleep 60', { language: 'bash', timeoutSeconds: 1 });
    expect(slow.output).toMatchObject({ stateLost: false });
    expect((await cell('echo $A', { language: 'bash' })).stdout).toEqual(['1']);
  });
});
