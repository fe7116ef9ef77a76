import { spawnSync } from 'node:child_process';
import { SandstreamClient } from '@sandstream/client';
import { dockerEngine, findCarrierImage, repoRoot, runCommand } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ComposeLeftovers, ComposeStack } from '../helpers/compose-stack.js';
import { PrometheusServer } from '../helpers/prometheus-server.js';

/*
 * docker-compose.yml, run: Debian's docker-compose brings the stack up from the locally built
 * images (scripts/images/datastores.sh, services.sh, built here when missing or stale) under a
 * project name of its own; a job and a live sandbox run on the Docker backend, sandboxes on the
 * stack's sandbox network reaching its Redis; a real Prometheus scrapes every service; and the
 * stack goes down leaving no container, network or volume behind. It runs in every CI, so it
 * stays lean: one job, one sandbox, one Prometheus, and the time each part took is printed.
 */
const IMAGE = 'sandstream/debian:bookworm';
const hasTool = (tool: string, ...args: string[]) => spawnSync(tool, args, { stdio: 'ignore' }).status === 0;
const { skip: noEngine } = await dockerEngine('the compose stack test');
const carrierImage = findCarrierImage();
// CI installs docker-compose and prometheus (scripts/test.mjs) and must never pass by skipping.
const ready =
  !noEngine && !!carrierImage && hasTool('docker-compose', 'version') && hasTool('prometheus', '--version');
const run = ready || process.env.CI === 'true';
if (!run)
  process.stderr.write(
    '\n*** SKIPPING the compose stack test: needs Docker, the carrier, docker-compose and prometheus ***\n\n',
  );

const timings: [string, number][] = [];
async function timed<T>(what: string, work: () => T | Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await work();
  } finally {
    timings.push([what, (performance.now() - started) / 1000]);
  }
}

async function buildImages(): Promise<void> {
  for (const script of ['datastores.sh', 'services.sh']) {
    const res = await runCommand('bash', [`${repoRoot}scripts/images/${script}`]);
    if (res.status !== 0) throw new Error(`scripts/images/${script} failed: ${res.stderr}`);
  }
}

describe.skipIf(!run)('docker-compose.yml brought up for real', () => {
  let stack: ComposeStack;
  let client: SandstreamClient | undefined;
  let prometheus: PrometheusServer | undefined;
  let down = false;
  const started = performance.now();

  beforeAll(async () => {
    await timed('images (built when missing or stale)', buildImages);
    stack = await ComposeStack.create({ carrierImage: carrierImage ?? 'sandstream/agent-carrier:dev' });
    await timed('docker-compose up (until healthy)', () => stack.up());
    client = new SandstreamClient({ redisUrl: stack.redisUrl });
  }, 600_000);

  afterAll(async () => {
    // Each step whatever the one before did: a leaked Prometheus or stack outlives the run.
    await prometheus?.stop();
    await client?.close().catch(() => undefined);
    // Only after a failure: the last test takes the stack down and checks that nothing is left.
    if (stack && !down) {
      await stack.down();
      stack.purgeSandboxes();
    }
    const total = (performance.now() - started) / 1000;
    const parts = timings.map(([what, s]) => `${what} ${s.toFixed(1)} s`).join(', ');
    console.log(`[compose] ${total.toFixed(1)} s in all: ${parts}`);
  }, 120_000);

  it('runs a job on the Docker backend through the compose Redis', async () => {
    const job = await timed('job (submit to succeeded)', async () => {
      const { jobId } = await client!.submit({
        id: `${stack.project}-job`,
        image: IMAGE,
        steps: [
          { kind: 'writeFile', path: 'hello.txt', content: 'hello from compose\n' },
          { command: 'cat', args: ['hello.txt'] },
          { command: 'sh', args: ['-c', 'test -f /.dockerenv && echo in-docker'] },
        ],
      });
      return client!.wait(jobId, { timeoutMs: 120_000 });
    });
    expect(job.state, `${job.reason}\n${stack.logs()}`).toBe('succeeded');
    const stdout: string[] = [];
    for await (const item of client!.follow(job.id))
      if (item.type === 'output' && item.stream === 'stdout') stdout.push(item.line);
    expect(stdout).toEqual(['hello from compose', 'in-docker']);
  }, 180_000);

  it('runs a live sandbox on the stack sandbox network, and closes it', async () => {
    await timed('live sandbox (create, exec, files, close)', async () => {
      const sandbox = await client!.sandboxes.create({ id: `${stack.project}-live`, image: IMAGE });
      // pod-lifecycle put it on the stack's own network, labelled with the stack's installation.
      const [container] = stack.leftovers().sandboxes;
      expect(container).toBeDefined();
      const networks = spawnSync(
        'docker',
        ['inspect', '-f', '{{json .NetworkSettings.Networks}}', container!],
        {
          encoding: 'utf8',
        },
      ).stdout;
      expect(Object.keys(JSON.parse(networks) as object)).toEqual([stack.sandboxNetwork]);

      expect(await sandbox.files.write('notes/a.txt', 'alpha\n')).toBe(6);
      expect(await sandbox.exec(['sh', '-c', 'cat notes/a.txt; echo beta >> notes/a.txt'])).toMatchObject({
        exitCode: 0,
        stdout: 'alpha\n',
      });
      expect((await sandbox.exec('cat notes/a.txt')).stdout).toBe('alpha\nbeta\n');
      // Reach: Redis by name, and nothing else of the stack (docs/sandbox-backends.md).
      expect((await sandbox.exec('getent hosts redis')).exitCode).toBe(0);
      expect((await sandbox.exec('getent hosts nats scheduler pod-lifecycle')).exitCode).toBe(2);
      await sandbox.close();
    });
    await expect.poll(() => stack.leftovers().sandboxes, { timeout: 60_000 }).toEqual([]);
  }, 240_000);

  it('runs a job and a live sandbox through the HTTP API, with the key the deployment gave it', async () => {
    await timed('through the API (job, live sandbox)', async () => {
      // The SDK over HTTP, as a caller outside the stack: no Redis, the admin key of API_ADMIN_KEY.
      const http = new SandstreamClient({ url: stack.apiUrl, apiKey: stack.adminKey });
      try {
        const { jobId } = await http.submit({
          id: `${stack.project}-api-job`,
          image: IMAGE,
          steps: [{ command: 'sh', args: ['-c', 'echo via-api; test -f /.dockerenv && echo in-docker'] }],
        });
        const record = await http.wait(jobId, { timeoutMs: 120_000 });
        expect(record.state, `${record.reason}\n${stack.logs()}`).toBe('succeeded');
        const lines: string[] = [];
        for await (const item of http.follow(jobId)) if (item.type === 'output') lines.push(item.line);
        expect(lines).toEqual(['via-api', 'in-docker']);

        const sandbox = await http.sandboxes.create({ id: `${stack.project}-api-live`, image: IMAGE });
        expect(await sandbox.files.write('a.txt', 'over http\n')).toBe(10);
        expect(await sandbox.exec(['cat', 'a.txt'])).toMatchObject({ exitCode: 0, stdout: 'over http\n' });
        await sandbox.close();
        // Anonymous access is off in the stack: no key, no answer.
        expect((await fetch(`${stack.apiUrl}/v1/jobs`)).status).toBe(401);
      } finally {
        await http.close();
      }
    });
    await expect.poll(() => stack.leftovers().sandboxes, { timeout: 60_000 }).toEqual([]);
  }, 240_000);

  it('a real Prometheus scrapes every service; queue depth and start latency are in its API', async () => {
    await timed('Prometheus (start to series present)', async () => {
      prometheus = await PrometheusServer.start(
        Object.fromEntries(stack.services.map((s) => [s, `127.0.0.1:${stack.metricsPort(s)}`])),
      );
      await expect
        .poll(async () => (await prometheus!.targets()).map((t) => `${t.labels.job}:${t.health}`).sort(), {
          timeout: 60_000,
        })
        .toEqual(stack.services.map((s) => `${s}:up`).sort());
      // The scheduler observes the queues' lengths at every scrape.
      await expect
        .poll(async () => (await prometheus!.query('sandstream_queue_depth')).map((s) => s.metric.job), {
          timeout: 60_000,
        })
        .toContain('scheduler');
      // The sandboxes started above, both of them, as pod-lifecycle timed them.
      await expect
        .poll(
          async () => {
            const [sample] = await prometheus!.query(
              'sum(sandstream_sandbox_start_latency_count{job="pod-lifecycle",backend="docker"})',
            );
            return Number(sample?.value[1] ?? 0);
          },
          { timeout: 60_000 },
        )
        .toBeGreaterThanOrEqual(2);
    });
  }, 240_000);

  it('goes down leaving no container, network, volume or sandbox behind', async () => {
    const during = stack.leftovers();
    expect(during.containers.length).toBeGreaterThanOrEqual(2 + stack.services.length);
    expect(during.volumes.length).toBe(2);
    // The client first: its connections would otherwise see Redis vanish under them.
    await client?.close();
    client = undefined;
    await timed('docker-compose down', () => stack.down());
    down = true;
    const nothing: ComposeLeftovers = {
      containers: [],
      networks: [],
      volumes: [],
      sandboxes: [],
      sandboxVolumes: [],
    };
    expect(stack.leftovers()).toEqual(nothing);
  });
});
