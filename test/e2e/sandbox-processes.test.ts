import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommandCancelledError, type Sandbox } from '@sandstream/client';
import { liveBackends } from '@sandstream/test-support';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 28, item 2: a command that ends, times out or is cancelled leaves no process it started,
// including ones that called setsid or double-forked; a background process lives until it is
// killed. Through the four services and the SDK, in-process, on Docker (runc) and, when the engine
// has runsc, on gVisor (whose /proc has no task/<tid>/children: the agent searches all of /proc).

interface ProcsBackend {
  name: string;
  /** The sandbox spec's image or template. */
  spec: { image: string } | { template: string };
  env: Record<string, string>;
  /** `docker top` shows the container's processes (runc; under runsc it shows none of them). */
  docker: boolean;
  /** Sleepers in the fork bomb. */
  count: number;
}

const runtimes = await new Dockerode()
  .info()
  .then((info: { Runtimes?: Record<string, unknown> }) => Object.keys(info.Runtimes ?? {}))
  .catch(() => [] as string[]);

function backends(): ProcsBackend[] {
  const live = liveBackends().map((b) => ({
    name: b.name,
    spec: { image: b.image },
    env: b.env,
    docker: b.name === 'docker',
    count: 48,
  }));
  const runc = live.find((b) => b.docker);
  if (!runc || !runtimes.includes('runsc')) return live;
  const image = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
  const templates = join(mkdtempSync(join(tmpdir(), 'sandstream-procs-')), 'templates.yaml');
  writeFileSync(templates, `templates:\n  gvisor:\n    image: ${image}\n    runtimeClass: gvisor\n`);
  return [
    ...live,
    {
      name: 'gvisor',
      spec: { template: 'gvisor' },
      env: { ...runc.env, SANDSTREAM_TEMPLATES_FILE: templates },
      docker: false,
      // gVisor's ptrace platform backs each sandboxed process with host threads that count
      // against the container's pids limit: at 512, 24 sleepers run and 32 kill the whole sandbox
      // (measured with `docker run --runtime runsc --pids-limit 512`, without Sandstream).
      count: 16,
    },
  ];
}

/**
 * A bounded fork bomb (this machine is shared): `count` sleepers, each out of the command's
 * process group and session by `setsid`, half of them after a double fork (orphans at once),
 * half of each ignoring SIGTERM. Each appends its pid to `file` before it sleeps; the script
 * waits until all are there and says so.
 */
function scatter(file: string, count: number): string {
  return `
: > ${file}
for i in $(seq ${count / 4}); do
  setsid sh -c 'echo $$ >> ${file}; exec sleep 1000' &
  setsid sh -c 'trap "" TERM; echo $$ >> ${file}; exec sleep 1000' &
  (setsid sh -c 'echo $$ >> ${file}; exec sleep 1000' &)
  (setsid sh -c 'trap "" TERM; echo $$ >> ${file}; exec sleep 1000' &)
done
while [ "$(wc -l < ${file})" -lt ${count} ]; do sleep 0.05; done
echo scattered
`;
}

/** The pids in `file` still alive inside the sandbox (not zombies), asked by a following exec. */
async function stillAlive(sandbox: Sandbox, file: string): Promise<{ written: number; alive: number[] }> {
  const r = await sandbox.exec([
    'sh',
    '-c',
    `n=0; for p in $(cat ${file}); do n=$((n+1)); if [ -e /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status; then echo "alive $p"; fi; done; echo "written $n"`,
  ]);
  const lines = r.stdout.split('\n').filter(Boolean);
  return {
    written: Number(lines.find((l) => l.startsWith('written '))?.slice(8)),
    alive: lines.filter((l) => l.startsWith('alive ')).map((l) => Number(l.slice(6))),
  };
}

/** From the host: the `sleep` processes of the sandbox's container (Docker only). */
function sleepersSeenByHost(sandboxId: string): number {
  const container = execFileSync(
    'docker',
    [
      'ps',
      '-q',
      '--filter',
      `label=sandstream.dev/job-id=${sandboxId}`,
      '--filter',
      'label=sandstream.dev/role=toolchain',
    ],
    { encoding: 'utf8' },
  ).trim();
  expect(container, `the container of ${sandboxId}`).toMatch(/^[0-9a-f]+$/);
  const top = execFileSync('docker', ['top', container, '-o', 'pid,stat,comm'], { encoding: 'utf8' });
  return top.split('\n').filter((line) => / sleep$/.test(line) && !/ Z/.test(line)).length;
}

describe.each(backends())(
  'no process outlives its command ($name backend)',
  ({ name, spec, env, docker, count }) => {
    let stack: Stack;
    beforeAll(async () => {
      stack = await startStack({ label: name === 'in-process' ? 'procs' : `p${name.slice(0, 4)}`, env });
    }, 120_000);
    afterAll(async () => {
      await stack?.stop();
    });
    const id = (n: string) => `${stack.namespace}-${n}`;
    const expectNothingLeft = async (sandbox: Sandbox, file: string) => {
      expect(await stillAlive(sandbox, file)).toEqual({ written: count, alive: [] });
      if (docker) expect(sleepersSeenByHost(sandbox.id)).toBe(0);
    };

    it('a fork bomb of setsid and double-forked sleepers dies with its timeout', {
      timeout: 180_000,
    }, async () => {
      await using sandbox = await stack.client.sandboxes.create({ id: id('timeout'), ...spec });
      const r = await sandbox.exec(`${scatter('timeout.pids', count)}sleep 1000`, { timeoutSeconds: 20 });
      expect(r).toMatchObject({ timedOut: true, stdout: 'scattered\n' });
      await expectNothingLeft(sandbox, 'timeout.pids');
    });

    it('a fork bomb of setsid and double-forked sleepers dies with its cancel', {
      timeout: 180_000,
    }, async () => {
      await using sandbox = await stack.client.sandboxes.create({ id: id('cancel'), ...spec });
      const controller = new AbortController();
      const running = sandbox.exec(`${scatter('cancel.pids', count)}sleep 1000`, {
        signal: controller.signal,
        onStdout: (line) => {
          if (line.startsWith('scattered')) controller.abort();
        },
      });
      const err = await running.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(CommandCancelledError);
      await expectNothingLeft(sandbox, 'cancel.pids');
    });

    it('a command that ends after leaving `setsid sleep 1000 &` leaves nothing', {
      timeout: 120_000,
    }, async () => {
      await using sandbox = await stack.client.sandboxes.create({ id: id('ends'), ...spec });
      const r = await sandbox.exec(
        "setsid sh -c 'echo $$ > ends.pid; exec sleep 1000' & while [ ! -s ends.pid ]; do sleep 0.05; done; echo left",
      );
      expect(r).toMatchObject({ exitCode: 0, stdout: 'left\n' });
      const check = await sandbox.exec([
        'sh',
        '-c',
        'p=$(cat ends.pid); if [ -e /proc/$p ] && ! grep -q "^State:.*Z" /proc/$p/status; then echo alive; else echo gone; fi',
      ]);
      expect(check.stdout).toBe('gone\n');
      if (docker) expect(sleepersSeenByHost(sandbox.id)).toBe(0);
    });

    it('a background process and its setsid child outlive the start call and die on kill', {
      timeout: 120_000,
    }, async () => {
      await using sandbox = await stack.client.sandboxes.create({ id: id('bg'), ...spec });
      const proc = await sandbox.processes.start(
        "setsid sh -c 'echo $$ >> bg.pids; exec sleep 1000' & echo $$ >> bg.pids; echo up; sleep 1000",
      );
      const lines: string[] = [];
      const ended = proc.follow({ onStdout: (line) => lines.push(line) });
      await expect.poll(() => lines, { timeout: 60_000 }).toEqual(['up']);
      const alive = () => stillAlive(sandbox, 'bg.pids');
      // Both written, both running, after the start call and after another command ended.
      await expect.poll(async () => (await alive()).written, { timeout: 30_000 }).toBe(2);
      expect((await alive()).alive).toHaveLength(2);
      if (docker) expect(sleepersSeenByHost(sandbox.id)).toBe(2);
      await proc.kill();
      await ended.then(
        () => undefined,
        () => undefined,
      );
      await expect.poll(async () => (await alive()).alive, { timeout: 30_000 }).toEqual([]);
      if (docker) expect(sleepersSeenByHost(sandbox.id)).toBe(0);
    });
  },
);
