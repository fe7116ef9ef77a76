import { execFileSync } from 'node:child_process';
import { CommandCancelledError, type Sandbox, SandboxCodeError } from '@sandstream/client';
import { findCarrierImage, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-run.js';
import { type Transport, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// The code interpreter end to end (docs/code-interpreter.md): the services as processes, a live
// sandbox, runCode through the SDK over Redis and over HTTP. In-process, Python is the host's
// Debian python3 (named: a pyenv one comes first on PATH here) without matplotlib or pandas, so
// plots and DataFrames are covered on Docker with the python template image.

const redisUrl = testRedisUrl();
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const PYTHON_IMAGE = process.env.SANDSTREAM_TEST_IMAGE_PYTHON ?? 'sandstream/python:bookworm';

function imagePresent(image: string): boolean {
  try {
    execFileSync('docker', ['image', 'inspect', image], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

interface Case {
  name: 'in-process' | 'docker';
  transport: Transport;
  image: string;
  env: Record<string, string>;
  sandboxEnv: Record<string, string>;
}

const cases: Case[] = [
  {
    name: 'in-process',
    transport: 'redis',
    image: 'debian:bookworm-slim',
    env: {},
    sandboxEnv: { SANDSTREAM_PYTHON: '/usr/bin/python3' },
  },
  {
    name: 'in-process',
    transport: 'http',
    image: 'debian:bookworm-slim',
    env: {},
    sandboxEnv: { SANDSTREAM_PYTHON: '/usr/bin/python3' },
  },
];
const carrier = findCarrierImage();
if ((carrier && imagePresent(PYTHON_IMAGE)) || process.env.CI === 'true') {
  cases.push({
    name: 'docker',
    transport: 'redis',
    image: PYTHON_IMAGE,
    env: {
      SANDBOX_TYPE: 'docker',
      SANDSTREAM_DOCKER_NETWORK: 'host',
      SANDSTREAM_ALLOW_OPEN_REDIS: '1',
      SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
    },
    sandboxEnv: {},
  });
}

describe.each(cases)(
  'code interpreter ($name backend, over $transport)',
  ({ name, transport, image, env, sandboxEnv }) => {
    let stack: Stack;
    let view: TransportView;
    let sandbox: Sandbox;
    beforeAll(async () => {
      // NATS: a pause keeps the sandbox's files in the snapshot store (one test pauses).
      stack = await startStack({ label: `code${transport}`, env: { NATS_URL: natsUrl, ...env } });
      view = await viewThrough(stack, transport, redisUrl);
      sandbox = await view.client.sandboxes.create({ image, env: sandboxEnv });
    }, 180_000);
    afterAll(async () => {
      await sandbox?.close().catch(() => {});
      await view?.stop();
      await stack?.stop();
    });

    it('keeps Python state between cells and answers the last expression, streaming stdout and stderr in order', async () => {
      expect((await sandbox.runCode('x = 40\nimport sys')).results).toEqual([]);
      const lines: string[] = [];
      const execution = await sandbox.runCode(
        "print('one')\nprint('two', file=sys.stderr)\nprint('three')\nx + 2",
        {
          onStdout: (line) => lines.push(`out:${line}`),
          onStderr: (line) => lines.push(`err:${line}`),
        },
      );
      expect(lines).toEqual(['out:one', 'err:two', 'out:three']);
      expect(execution).toMatchObject({
        language: 'python',
        context: 'default-python',
        results: [{ text: '42', isMainResult: true }],
        stdout: 'one\nthree\n',
        stderr: 'two\n',
        stateLost: false,
        timedOut: false,
        cancelled: false,
      });
      expect(execution.error).toBeUndefined();
    });

    it('tells onResult each result as the cell produces it: before output printed after it, each once, in order', async () => {
      // A marker printed after the sleep: a result told at the cell's end would come after it.
      const events: string[] = [];
      const told: unknown[] = [];
      const execution = await sandbox.runCode(
        "import time\ndisplay('first')\ntime.sleep(2)\nprint('after-sleep')\ndisplay('second')\n'last'",
        {
          onStdout: (line) => events.push(`out:${line}`),
          onResult: (result) => {
            told.push(result);
            events.push(`result:${result.text}`);
          },
        },
      );
      expect(events).toEqual(["result:'first'", 'out:after-sleep', "result:'second'", "result:'last'"]);
      expect(told).toEqual(execution.results);
      expect(execution.results.map((r) => [r.text, r.isMainResult])).toEqual([
        ["'first'", false],
        ["'second'", false],
        ["'last'", true],
      ]);
    });

    it('tells a result too big to stream (and those after it) at the cell’s end, in order, once each', async () => {
      // 3 MB is more than the agent's output buffer holds (2 MiB): it travels in the step's
      // result only; the small one before it is live, the one after it waits to keep the order.
      const events: string[] = [];
      const execution = await sandbox.runCode(
        "display(1)\ndisplay('x' * 3_000_000)\nprint('marker')\ndisplay(2)",
        {
          onStdout: (line) => events.push(`out:${line}`),
          onResult: (result) => events.push(`result:${(result.text ?? '').slice(0, 4)}`),
        },
      );
      expect(events).toEqual(['result:1', 'out:marker', "result:'xxx", 'result:2']);
      expect(execution.results).toHaveLength(3);
      expect(execution.results[1]?.text).toHaveLength(3_000_002);
    });

    it('reports an exception with its traceback', async () => {
      const execution = await sandbox.runCode('def f():\n    return 1 / 0\nf()');
      expect(execution.error).toMatchObject({ name: 'ZeroDivisionError', value: 'division by zero' });
      expect(execution.error?.traceback).toContain('return 1 / 0');
    });

    it('interrupts a cell at its timeout and keeps the state; an abort does the same and throws', async () => {
      const execution = await sandbox.runCode(
        "import time\nkept = 'yes'\nprint('sleeping')\ntime.sleep(600)",
        {
          timeoutSeconds: 2,
        },
      );
      expect(execution).toMatchObject({ timedOut: true, stateLost: false, stdout: 'sleeping\n' });
      expect(execution.error?.name).toBe('TimeoutError');
      expect(execution.error?.traceback).toContain('KeyboardInterrupt');
      expect((await sandbox.runCode('kept')).results[0]?.text).toBe("'yes'");

      const abort = new AbortController();
      const cancelled = sandbox.runCode('time.sleep(600)', {
        signal: abort.signal,
        onStart: () => setTimeout(() => abort.abort(), 500),
      });
      await expect(cancelled).rejects.toBeInstanceOf(CommandCancelledError);
      expect((await sandbox.runCode('kept')).results[0]?.text).toBe("'yes'");
    });

    it('keeps two contexts apart, each in its own working directory', async () => {
      const first = await sandbox.createCodeContext({ cwd: '/tmp' });
      const second = await sandbox.createCodeContext();
      await sandbox.runCode('secret = 1', { context: first });
      expect((await sandbox.runCode("'secret' in globals()", { context: second })).results[0]?.text).toBe(
        'False',
      );
      expect((await sandbox.runCode('import os; os.getcwd()', { context: first })).results[0]?.text).toBe(
        "'/tmp'",
      );
      expect((await sandbox.runCode("'secret' in globals()")).results[0]?.text).toBe('False');
      // The history names each cell's context (createCodeContext's empty cell, and two more).
      const history = await sandbox.history();
      expect(history.filter((c) => c.kind === 'code' && c.session === first.id)).toHaveLength(3);
    });

    it('runs JavaScript on the image’s node in contexts of its own', async () => {
      const js = await sandbox.createCodeContext({ language: 'javascript' });
      await sandbox.runCode('const base = 40', { context: js });
      const execution = await sandbox.runCode("console.log('hi'); ({ sum: base + 2 })", { context: js });
      expect(execution).toMatchObject({
        language: 'javascript',
        stdout: 'hi\n',
        results: [{ text: '{ sum: 42 }', json: { sum: 42 }, isMainResult: true }],
      });
      const thrown = await sandbox.runCode('null.x', { language: 'javascript' });
      expect(thrown.error?.name).toBe('TypeError');
      await expect(sandbox.runCode('1', { context: js.id, language: 'python' })).rejects.toBeInstanceOf(
        SandboxCodeError,
      );
    });

    it('restarts a kernel that died and says the state was lost', async () => {
      const ctx = await sandbox.createCodeContext();
      await sandbox.runCode('y = 1', { context: ctx });
      const died = await sandbox.runCode('import os\nos._exit(1)', { context: ctx });
      expect(died).toMatchObject({ stateLost: true, error: { name: 'KernelDied' } });
      expect((await sandbox.runCode("'y' in globals()", { context: ctx })).results[0]?.text).toBe('False');
    });

    it('says the state was lost when a pause replaced the agent, for the first cell of each old context only', async () => {
      const paused = await view.client.sandboxes.create({ image, env: sandboxEnv });
      try {
        const ctx = await paused.createCodeContext();
        await paused.runCode('z = 41', { context: ctx });
        await paused.runCode('w = 1');
        await paused.pause();
        await paused.resume();
        // The kernels ended with the old agent: the new one starts fresh kernels, and says so.
        const after = await paused.runCode("'z' in globals()", { context: ctx });
        expect(after).toMatchObject({ stateLost: true, results: [{ text: 'False' }] });
        expect(await paused.runCode("'w' in globals()")).toMatchObject({ stateLost: true });
        expect((await paused.runCode('z = 1', { context: ctx })).stateLost).toBe(false);
        // A context first used after the resume had no state to lose.
        const fresh = await paused.createCodeContext();
        expect((await paused.runCode('1', { context: fresh })).stateLost).toBe(false);
      } finally {
        await paused.close().catch(() => {});
      }
    }, 120_000);

    it('runs a cell from the CLI: output and the main result, exit 1 with the traceback on an exception', async () => {
      const ok = await runCli(['run-code', sandbox.id, '--', "print('from cli')\n6 * 7"], view.clientEnv);
      expect(ok).toMatchObject({ status: 0, stdout: 'from cli\n42\n' });
      const js = await runCli(
        ['run-code', '--language', 'javascript', sandbox.id, '--', '[1, 2, 3].map((n) => n * 2)'],
        view.clientEnv,
      );
      expect(js).toMatchObject({ status: 0, stdout: '[ 2, 4, 6 ]\n' });
      const raised = await runCli(['run-code', sandbox.id, '--', "raise ValueError('nope')"], view.clientEnv);
      expect(raised.status).toBe(1);
      expect(raised.stderr).toContain('Traceback');
      expect(raised.stderr).toContain('ValueError: nope');
      const bad = await runCli(['run-code', '--language', 'ruby', sandbox.id, '--', '1'], view.clientEnv);
      expect(bad.status).toBe(2);
      expect(bad.stderr).toContain('--language must be one of python, javascript, bash');
    });

    it.runIf(transport === 'http')('answers POST …/code as JSON, and as an event stream', async () => {
      const post = (body: unknown, accept: string) =>
        fetch(`${view.url}/v1/sandboxes/${sandbox.id}/code`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept },
          body: JSON.stringify(body),
        });
      const json = await post({ code: "print('raw')\n'done'" }, 'application/json');
      expect(json.status).toBe(200);
      expect(await json.json()).toMatchObject({
        stdout: 'raw\n',
        results: [{ text: "'done'", isMainResult: true }],
        cancelled: false,
      });
      const stream = await (await post({ code: "print('s')\n7" }, 'text/event-stream')).text();
      const events = [...stream.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
      expect(events).toEqual(['started', 'stdout', 'result', 'execution']);
      const refused = await post({ code: '1', language: 'ruby' }, 'application/json');
      expect(refused.status).toBe(400);
      const unknown = await post({ code: '1', lang: 'python' }, 'application/json');
      expect(unknown.status).toBe(400);
      expect(await unknown.text()).toContain('did you mean \\"language\\"?');
    });

    it.runIf(name === 'docker')(
      'sends each figure plt.show() shows at once, before the cell goes on, and display(figure) as PNG',
      async () => {
        const events: string[] = [];
        const execution = await sandbox.runCode(
          [
            'import time',
            'import matplotlib.pyplot as plt',
            'plt.plot([1, 2, 3], [1, 4, 9])',
            'plt.show()',
            'time.sleep(2)',
            "print('after-sleep')",
            'figure = plt.figure()',
            'plt.plot([3, 2, 1])',
            'display(figure)',
            'plt.close(figure)',
          ].join('\n'),
          {
            onStdout: (line) => events.push(`out:${line}`),
            onResult: (result) => events.push(result.png ? 'png' : `text:${result.text}`),
          },
        );
        expect(events).toEqual(['png', 'out:after-sleep', 'png']);
        expect(execution.results).toHaveLength(2);
        for (const result of execution.results) {
          const png = Buffer.from(result.png ?? '', 'base64');
          expect(png.subarray(0, 4)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
          // A plot's PNG is several event pieces: put back together whole.
          expect(png.length).toBeGreaterThan(10_000);
        }
      },
    );

    it.runIf(name === 'docker')(
      'returns a matplotlib figure as PNG and a DataFrame as HTML and text',
      async () => {
        const plot = await sandbox.runCode(
          'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title("squares")\nNone',
        );
        expect(plot.results).toHaveLength(1);
        const png = Buffer.from(plot.results[0]?.png ?? '', 'base64');
        expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
        const frame = await sandbox.runCode(
          "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})",
        );
        expect(frame.results[0]).toMatchObject({ isMainResult: true });
        expect(frame.results[0]?.html).toContain('<table');
        expect(frame.results[0]?.text).toContain('a  b');
      },
    );
  },
);
