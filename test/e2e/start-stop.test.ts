import { type ChildProcess, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxLabels } from '@sandstream/sandbox';
import { childPids, dockerEngine, freePort, repoRoot, uniqueNamespace } from '@sandstream/test-support';
import { describe, expect, it } from 'vitest';
import { spawnStartScript } from '../helpers/start-script.js';

// Issue 27 §5: stopping `npm start` leaves nothing of its run behind — warm pool members, live
// sandboxes, running jobs' sandboxes, their volumes, child processes — within 10 s, on Docker.
const { docker, skip } = await dockerEngine('npm start stop');

const IMAGE = 'sandstream/debian:bookworm';

interface Run {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  cacheDir: string;
  namespace: string;
}

function startRun(scratch: string): Promise<Run> {
  const namespace = uniqueNamespace('start-stop');
  const cacheDir = join(scratch, '.cache');
  const templates = join(scratch, 'templates.yaml');
  writeFileSync(templates, `templates:\n  warm:\n    image: ${IMAGE}\n    pool: { min: 2, max: 2 }\n`);
  const job = join(scratch, 'long.yaml');
  writeFileSync(
    job,
    `image: ${IMAGE}\nsteps:\n  - command: sh\n    args: ["-c", "echo long-running; sleep 600"]\n`,
  );
  const {
    REDIS_URL: _ownRedis,
    NATS_URL: _ownNats,
    SANDSTREAM_NAMESPACE: _ns,
    LOG_ARCHIVE: _archive,
    ...env
  } = process.env;
  return freePort().then((apiPort) => {
    const run = spawnStartScript(['--namespace', namespace, '--scale', 'step-dispatcher=2', '--job', job], {
      ...env,
      API_PORT: String(apiPort),
      SANDSTREAM_CACHE_DIR: cacheDir,
      SANDSTREAM_TEMPLATES_FILE: templates,
      SANDBOX_TYPE: 'docker',
      SANDSTREAM_SKIP_BOOTSTRAP: '1',
    });
    return { ...run, cacheDir, namespace };
  });
}

/** A process and its kernel start time, so a reused pid is not taken for it. */
type Proc = { pid: number; start: string };
function startTime(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[19];
  } catch {
    return undefined;
  }
}
function descendants(pid: number): Proc[] {
  const out: Proc[] = [];
  const walk = (p: number) => {
    let kids: number[] = [];
    try {
      kids = childPids(p);
    } catch {
      return; // gone
    }
    for (const kid of kids) {
      const start = startTime(kid);
      if (start !== undefined) out.push({ pid: kid, start });
      walk(kid);
    }
  };
  walk(pid);
  return out;
}

/** What of the run is still there: containers and volumes by its installation label, processes. */
async function leftovers(installation: string, procs: Proc[], run: Run): Promise<string[]> {
  const label = [`${SandboxLabels.installation}=${installation}`];
  const containers = await docker.listContainers({ all: true, filters: { label } });
  const { Volumes } = await docker.listVolumes({ filters: { label } });
  return [
    ...(run.child.exitCode === null && run.child.signalCode === null ? ['scripts/start.mjs'] : []),
    ...containers.map((c) => `container ${c.Names.join(',')} (${c.State})`),
    ...(Volumes ?? []).map((v) => `volume ${v.Name}`),
    ...procs.filter((p) => startTime(p.pid) === p.start).map((p) => `process ${p.pid}`),
  ];
}

/**
 * Up to the moment of the signal: pool members booted, the job's step running (its output
 * followed by start.mjs's own CLI child), a live sandbox open. Returns the run's installation
 * (read off the live sandbox's container, as the backend labelled it).
 */
async function populate(run: Run): Promise<string> {
  await expect
    .poll(() => run.output(), { timeout: 180_000, interval: 250 })
    .toMatch(/^(\s*│ )?long-running$|✗/m);
  expect(run.output()).toMatch(/^(\s*│ )?long-running$/m);
  const { redisUrl } = JSON.parse(readFileSync(join(run.cacheDir, 'sandstream', 'local.json'), 'utf8')) as {
    redisUrl: string;
  };
  const created = spawnSync(
    process.execPath,
    [join(repoRoot, 'libs/client/bin/sandstream.mjs'), 'sandbox', 'create', IMAGE],
    {
      env: { ...process.env, REDIS_URL: redisUrl, SANDSTREAM_NAMESPACE: run.namespace },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  expect(created.status, created.stderr).toBe(0);
  const live = created.stdout.trim();
  const [container] = await docker.listContainers({ filters: { label: [`${SandboxLabels.jobId}=${live}`] } });
  const installation = container?.Labels[SandboxLabels.installation];
  expect(installation).toMatch(/\S/);
  // Both members made (they may still be booting: those must go too).
  await expect
    .poll(
      async () =>
        (
          await docker.listContainers({
            filters: { label: [`${SandboxLabels.installation}=${installation}`, SandboxLabels.warmPool] },
          })
        ).length,
      { timeout: 60_000, interval: 250 },
    )
    .toBe(2);
  return installation as string;
}

/** After a failure: whatever the run left, found by its namespace where the test got no further. */
async function cleanUp(installation: string | undefined, procs: Proc[], run: Run): Promise<void> {
  const all = [...procs, ...descendants(run.child.pid as number)];
  if (run.child.exitCode === null) run.child.kill('SIGKILL');
  for (const p of all) if (startTime(p.pid) === p.start) process.kill(p.pid, 'SIGKILL');
  const mine = (labels: Record<string, string> | undefined) =>
    installation
      ? labels?.[SandboxLabels.installation] === installation
      : labels?.[SandboxLabels.jobId]?.startsWith(`${run.namespace}-pool-`);
  const label = [`${SandboxLabels.managedBy}=${SandboxLabels.managedByValue}`];
  for (const c of await docker.listContainers({ all: true, filters: { label } }))
    if (mine(c.Labels)) await docker.getContainer(c.Id).remove({ force: true });
  for (const v of (await docker.listVolumes({ filters: { label } })).Volumes ?? [])
    if (mine(v.Labels)) await docker.getVolume(v.Name).remove();
}

describe.skipIf(skip)('stopping npm start (scripts/start.mjs) on Docker', () => {
  it.each([
    { signal: 'SIGINT' as const, killLifecycle: false },
    // pod-lifecycle killed hard first: nothing of its own shutdown runs, and still nothing stays.
    { signal: 'SIGTERM' as const, killLifecycle: true },
  ])(
    '$signal (pod-lifecycle killed -9 first: $killLifecycle) leaves nothing of the run within 10 s',
    async ({ signal, killLifecycle }) => {
      const scratch = mkdtempSync(join(tmpdir(), 'sandstream-start-stop-'));
      const run = await startRun(scratch);
      let installation: string | undefined;
      let procs: Proc[] = [];
      try {
        installation = await populate(run);
        if (killLifecycle) {
          const pid = Number(/✓ pod-lifecycle ready \(pid (\d+)/.exec(run.output())?.[1]);
          process.kill(pid, 'SIGKILL');
          await expect
            .poll(() => run.output(), { timeout: 10_000 })
            .toMatch(/✗ pod-lifecycle exited \(SIGKILL\)/);
        }
        procs = descendants(run.child.pid as number);
        expect(procs.length).toBeGreaterThanOrEqual(7); // services, the job's follower, Redis, NATS
        run.child.kill(signal);
        const left = installation;
        await expect.poll(() => leftovers(left, procs, run), { timeout: 10_000, interval: 250 }).toEqual([]);
        expect(await run.exited).toBe(0);
        expect(run.output()).toMatch(
          /sandboxes of this run: destroyed: 2 jobs and live sandboxes ended \(cancelled\), 2 warm pool members/,
        );
        expect(existsSync(join(run.cacheDir, 'sandstream', 'local.json'))).toBe(false);
      } finally {
        await cleanUp(installation, procs, run);
        rmSync(scratch, { recursive: true, force: true });
      }
    },
    300_000,
  );
});
