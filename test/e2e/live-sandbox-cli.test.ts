import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const redisUrl = testRedisUrl();

import { TRANSPORTS, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// The CLI forms of live sandboxes (contracts: scripts depend on them) against the four services.
const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');

// Once over Redis (REDIS_URL), once over the HTTP API (SANDSTREAM_URL): the same output and codes.
describe.each(TRANSPORTS)('sandstream sandbox / exec (over %s)', (transport) => {
  let stack: Stack;
  let view: TransportView;
  beforeAll(async () => {
    stack = await startStack({ label: transport === 'http' ? 'lclih' : 'lcli' });
    view = await viewThrough(stack, transport, redisUrl);
  });
  afterAll(async () => {
    await view?.stop();
    await stack?.stop();
  });
  const cli = (...args: string[]) => cliWithInput(undefined, ...args);
  const cliWithInput = (input: string | undefined, ...args: string[]) =>
    spawnSync(process.execPath, [cliPath, ...args], {
      env: { ...process.env, ...view.clientEnv },
      encoding: 'utf8',
      timeout: 60_000,
      ...(input === undefined ? {} : { input }),
    });

  it('create prints the id alone; exec streams output and exits with the command code; rm closes it', () => {
    const created = cli(
      'sandbox',
      'create',
      'debian:bookworm-slim',
      '--id',
      `${stack.namespace}-c1`,
      '--label',
      'app=demo',
      '--env',
      'GREETING=hello',
      '--idle-timeout',
      '300',
    );
    expect(created.status, created.stderr).toBe(0);
    expect(created.stdout).toBe(`${stack.namespace}-c1\n`);
    const id = created.stdout.trim();

    // Options after the id, before `--`; the command's own flags after it are left alone.
    const echo = cli('exec', id, '--env', 'X=1', '--', 'sh', '-c', 'echo $GREETING $X; echo err >&2; exit 7');
    expect(echo.stdout).toBe('hello 1\n');
    expect(echo.stderr).toBe('err\n');
    expect(echo.status).toBe(7);
    const shell = cli('exec', '--shell', '--cwd', '/tmp', id, '--', 'pwd && ls -d .');
    expect(shell.stdout).toBe('/tmp\n.\n');
    expect(shell.status).toBe(0);
    expect(cli('exec', '--timeout', '1', id, '--', 'sleep', '30').status).toBe(124);
    // -i: this process's stdin becomes the command's.
    const piped = cliWithInput('b\na\nc\n', 'exec', '-i', id, '--', 'sort');
    expect(piped.stdout).toBe('a\nb\nc\n');
    expect(piped.status).toBe(0);
    // cp in and out, as docker cp: a directory arrives under its own name.
    const local = mkdtempSync(join(tmpdir(), 'sandstream-cli-cp-'));
    try {
      mkdirSync(join(local, 'project'));
      writeFileSync(join(local, 'project', 'f.txt'), 'content\n');
      // A path relative to the sandbox's working directory: in-process, file steps are confined to
      // the job's directory (an absolute /tmp/dest would land in it, where `cat` would not look).
      expect(cli('cp', join(local, 'project'), `${id}:dest`).status).toBe(0);
      expect(cli('exec', id, '--', 'cat', 'dest/project/f.txt').stdout).toBe('content\n');
      expect(cli('cp', `${id}:dest/project`, join(local, 'back')).status).toBe(0);
      expect(readFileSync(join(local, 'back', 'project', 'f.txt'), 'utf8')).toBe('content\n');
      expect(cli('cp', 'a', 'b').stderr).toMatch(/cp needs a sandbox side/);
    } finally {
      rmSync(local, { recursive: true, force: true });
    }
    // A long-lived shell from a pipe, one command line at a time, its cd kept.
    const session = cliWithInput('cd /tmp\npwd\nexport A=7\necho "A=$A"\n', 'shell', id);
    expect(session.stdout).toBe('/tmp\nA=7\n');
    expect(session.status).toBe(0);
    const missing = cli('exec', id, '--', 'no-such-program-here');
    expect(missing.status).toBe(125);

    const ls = cli('sandbox', 'ls', '--label', 'app=demo');
    expect(ls.stdout).toMatch(new RegExp(`^${id} +default +ready`, 'm'));
    expect(cli('ls').stdout).toMatch(new RegExp(`^${id} +sandbox +default +ready`, 'm'));
    const inspect = cli('sandbox', 'inspect', id, '--json');
    expect(JSON.parse(inspect.stdout)).toMatchObject({ id, state: 'ready', labels: { app: 'demo' } });

    const rm = cli('sandbox', 'rm', id);
    expect(rm.status, rm.stderr).toBe(0);
    expect(rm.stdout).toBe(`${id} closed (user)\n`);
    expect(cli('exec', id, '--', 'true').status).toBe(125);
  });

  it('exits 130 when exec is interrupted, killing the command in the sandbox', async () => {
    const id = cli('sandbox', 'create', 'debian:bookworm-slim').stdout.trim();
    const child = spawn(process.execPath, [cliPath, 'exec', id, '--', 'sh', '-c', 'echo started; sleep 60'], {
      env: { ...process.env, ...view.clientEnv },
    });
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(130);
    expect(cli('sandbox', 'rm', id).status).toBe(0);
  });

  it('refuses bad usage (exit 2) and unknown sandboxes (exit 4)', () => {
    expect(cli('sandbox', 'inspect', `${stack.namespace}-nope`).status).toBe(4);
    expect(cli('exec', `${stack.namespace}-nope`, '--', 'true').status).toBe(4);
    expect(cli('sandbox', 'rm', `${stack.namespace}-nope`).status).toBe(4);
    const noCommand = cli('exec', 'x');
    expect(noCommand.status).toBe(2);
    expect(noCommand.stderr).toMatch(/needs a command after --/);
    const typo = cli('sandbox', 'create', 'img', '--idle-timout', '5');
    expect(typo.status).toBe(2);
    expect(typo.stderr).toMatch(/did you mean --idle-timeout/);
    expect(cli('sandbox', 'create').stderr).toMatch(/needs an image, --template <name> or --from-snapshot/);
    expect(cli('sandbox').stderr).toMatch(
      /sandbox needs a subcommand: create, restore, fork, ls, inspect, rm, pause, resume, url/,
    );
    expect(cli('sandbox', 'create', 'img', '--env', 'novalue').status).toBe(2);
  });
});
