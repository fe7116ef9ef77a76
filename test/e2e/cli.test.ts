import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TRANSPORTS, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// The built `sandstream` CLI against all four services: live output, structured step results
// and the exit code of each outcome.
const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');
const dir = mkdtempSync(join(tmpdir(), 'e2e-cli-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Once over Redis (REDIS_URL), once over the HTTP API (SANDSTREAM_URL): the same output and codes.
describe.each(TRANSPORTS)('sandstream submit --follow (over %s)', (transport) => {
  let stack: Stack;
  let view: TransportView;
  beforeAll(async () => {
    stack = await startStack({ label: transport === 'http' ? 'clih' : 'cli' });
    view = await viewThrough(stack, transport, testRedisUrl());
  });
  afterAll(async () => {
    await view?.stop();
    await stack?.stop();
  });
  const env = () => ({ ...process.env, ...view.clientEnv });
  const file = (name: string, body: string) => {
    const path = join(dir, name);
    writeFileSync(path, body);
    return path;
  };
  const submit = (path: string) =>
    spawnSync(process.execPath, [cliPath, 'submit', path, '--follow'], {
      env: env(),
      encoding: 'utf8',
      timeout: 60_000,
    });

  it('streams examples/hello.yaml with step headers and results, exit 0', () => {
    const run = submit(join(repoRoot, 'examples/hello.yaml'));
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/▶ step-1 {2}write a greeting — writeFile: hello\/greeting\.txt/);
    expect(run.stdout).toMatch(/greeting\.txt/);
    expect(run.stdout).toContain('  │ hello from sandstream');
    expect(run.stdout).toMatch(/greeting\.txt:1:1: hello from sandstream/);
    expect(run.stderr).toMatch(/● running[\s\S]*● succeeded/);
    // Not a TTY: no spinner frames or carriage returns.
    expect(run.stderr).not.toMatch(/\r/);
  });

  it('exits 1 for a failed job and 124 for a timed-out one', () => {
    const failed = submit(
      file('f.yaml', 'image: x\nsteps:\n  - command: sh\n    args: ["-c", "echo bad >&2; exit 3"]\n'),
    );
    expect(failed.status).toBe(1);
    expect(failed.stderr).toMatch(/bad\n[\s\S]*● failed \(step step-1 exited 3\)/);
    const timedOut = submit(
      file('t.yaml', 'image: x\ntimeoutSeconds: 1\nsteps:\n  - command: sleep\n    args: ["30"]\n'),
    );
    expect(timedOut.status).toBe(124);
  });

  it('exits 130 when the job is cancelled from another terminal', async () => {
    const path = file(
      'c.yaml',
      `id: ${stack.namespace}-cli-c-${transport}\nimage: x\nsteps:\n  - command: sleep\n    args: ["60"]\n`,
    );
    const follower = spawn(process.execPath, [cliPath, 'submit', path, '--follow'], { env: env() });
    let out = '';
    follower.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const code = new Promise<number | null>((resolve) => follower.once('exit', resolve));
    await vi.waitUntil(() => out.includes('▶ step-1'), { timeout: 60_000, interval: 100 });
    // `logs` without -f prints what there is of the running job and exits (it does not wait for
    // the job: over HTTP the stream is asked for with follow=false).
    const logs = spawnSync(process.execPath, [cliPath, 'logs', `${stack.namespace}-cli-c-${transport}`], {
      env: env(),
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(logs.status, logs.stderr).toBe(0);
    expect(logs.stdout).toContain('step-1');
    const cancel = spawnSync(process.execPath, [cliPath, 'cancel', `${stack.namespace}-cli-c-${transport}`], {
      env: env(),
      encoding: 'utf8',
    });
    expect(cancel.status).toBe(0);
    expect(await code).toBe(130);
  });
});
