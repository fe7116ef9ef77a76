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
    // cp in and out, as docker cp: a directory onto a missing path becomes that path (every
    // rule: cli-copy.test.ts).
    const local = mkdtempSync(join(tmpdir(), 'sandstream-cli-cp-'));
    try {
      mkdirSync(join(local, 'project'));
      writeFileSync(join(local, 'project', 'f.txt'), 'content\n');
      // A path relative to the sandbox's working directory: in-process, file steps are confined to
      // the job's directory (an absolute /tmp/dest would land in it, where `cat` would not look).
      expect(cli('cp', join(local, 'project'), `${id}:dest`).status).toBe(0);
      expect(cli('exec', id, '--', 'cat', 'dest/f.txt').stdout).toBe('content\n');
      expect(cli('cp', `${id}:dest`, join(local, 'back')).status).toBe(0);
      expect(readFileSync(join(local, 'back', 'f.txt'), 'utf8')).toBe('content\n');
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
    // Sixteen CLI processes one after another (each a Node start, spawnSync): 22–26 s on a
    // 2-core machine, 64 s once beside a heavy suite: a bound on a stuck call, as the others have.
  }, 180_000);

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

  it('ps lists and kills background processes; sandbox stats, history, keepalive; tables have a header, --json', async () => {
    const id = cli('sandbox', 'create', 'debian:bookworm-slim', '--label', 'app=ps').stdout.trim();
    const sandbox = await view.client.sandboxes.connect(id);
    const sleeper = await sandbox.processes.start(['sleep', '300']);
    expect(cli('exec', id, '--', 'sh', '-c', 'exit 3').status).toBe(3);

    const ps = cli('ps', id);
    expect(ps.status, ps.stderr).toBe(0);
    const [header, ...rows] = ps.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^PROCESS +STARTED +COMMAND$/);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatch(new RegExp(`^${sleeper.id} +\\S+ +sleep 300$`));
    expect(JSON.parse(cli('ps', id, '--json').stdout)).toMatchObject([{ id: sleeper.id, args: ['300'] }]);

    const history = cli('sandbox', 'history', id);
    expect(history.status, history.stderr).toBe(0);
    expect(history.stdout).toMatch(/^COMMAND +KIND +STARTED +OUTCOME +WHAT\n/);
    expect(history.stdout).toMatch(new RegExp(`^${sleeper.id} +run& +\\S+ +running +sleep 300$`, 'm'));
    expect(history.stdout).toMatch(/ run +\S+ +exit 3 +sh -c exit 3$/m);
    const entries = JSON.parse(cli('sandbox', 'history', id, '--json').stdout) as { id: string }[];
    expect(entries.map((e) => e.id)).toContain(sleeper.id);

    const stats = cli('sandbox', 'stats', id);
    expect(stats.status, stats.stderr).toBe(0);
    expect(stats.stdout).toMatch(/^workspace +\d+ B in \d+ files/m);
    // A background process is not counted as running (it does not keep the sandbox busy); over
    // HTTP the stats call itself may be.
    expect(stats.stdout).toMatch(/^commands +[3-9] run, [01] running/m);
    expect(JSON.parse(cli('sandbox', 'stats', id, '--json').stdout)).toMatchObject({
      commandsRun: expect.any(Number),
      workspaceFiles: expect.any(Number),
    });

    // Read through the CLI too: the suite's own HTTP client sits idle meanwhile, and its pooled
    // connection may be closed by then.
    const activity = () =>
      (JSON.parse(cli('sandbox', 'inspect', id, '--json').stdout) as { lastActivityAt?: number })
        .lastActivityAt ?? 0;
    const before = activity();
    const keep = cli('sandbox', 'keepalive', id);
    expect(keep.status, keep.stderr).toBe(0);
    expect(keep.stdout).toBe(`${id} kept alive\n`);
    expect(activity()).toBeGreaterThan(before);

    // Killing: an unknown process is not found (4); the running one goes, and ps is empty.
    expect(cli('ps', id, '--kill', 'no-such-process').status).toBe(4);
    const kill = cli('ps', id, '--kill', sleeper.id);
    expect(kill.status, kill.stderr).toBe(0);
    // Through the CLI as well: the header row alone once its tree is gone.
    await expect
      .poll(() => cli('ps', id).stdout.trimEnd().split('\n').length, { timeout: 120_000, interval: 1000 })
      .toBe(1);

    // Header rows, and --json for both listings.
    const sandboxes = cli('sandbox', 'ls', '--label', 'app=ps');
    expect(sandboxes.stdout).toMatch(new RegExp(`^ID +TENANT +STATE +IMAGE\n${id} +default +ready`));
    expect(JSON.parse(cli('sandbox', 'ls', '--label', 'app=ps', '--json').stdout)).toMatchObject([{ id }]);
    expect(cli('ls').stdout).toMatch(/^ID +KIND +TENANT +STATE +CREATED\n/);
    const all = JSON.parse(cli('ls', '--json').stdout) as { id: string }[];
    // As the table shows it: a sandbox, ready (not its job record's `running`).
    expect(all.find((r) => r.id === id)).toMatchObject({ kind: 'sandbox', state: 'ready' });
    expect(cli('sandbox', 'rm', id).status).toBe(0);
    // Some twenty CLI processes, each a few seconds on a loaded machine.
  }, 300_000);

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
      /sandbox needs a subcommand: create, restore, fork, ls, inspect, rm, pause, resume, url, set-timeout, network, stats, history, keepalive/,
    );
    expect(cli('sandbox', 'create', 'img', '--env', 'novalue').status).toBe(2);
  });

  // exec over Redis pushes first and learns the sandbox is not ready from the refusal (one round
  // trip for a ready one): a sandbox still queued must be waited for, as `connect` does, not
  // reported closed (exit 125).
  it('exec on a sandbox that is not ready yet waits for it, then runs the command', async () => {
    await stack.stopServices();
    const queued = await view.client.sandboxes.create({ image: 'debian:bookworm-slim' }, { wait: false });
    const child = spawn(
      process.execPath,
      [cliPath, 'exec', queued.id, '--', 'sh', '-c', 'echo ran; exit 5'],
      {
        env: { ...process.env, ...view.clientEnv },
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    // Long enough for the CLI to start and be refused (a few seconds on a loaded machine).
    const early = await Promise.race([exited, new Promise((r) => setTimeout(() => r('running'), 5000))]);
    expect(early, stderr).toBe('running');
    await stack.startServices();
    expect(await exited, stderr).toBe(5);
    expect(stdout).toBe('ran\n');
    expect(cli('sandbox', 'rm', queued.id).status).toBe(0);
  }, 120_000);
});
