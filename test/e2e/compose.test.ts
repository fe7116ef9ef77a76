import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { type Sandbox, SandstreamClient } from '@sandstream/client';
import { dockerEngine, findCarrierImage, repoRoot, runCommand } from '@sandstream/test-support';
import type { Egress } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ComposeLeftovers, ComposeStack } from '../helpers/compose-stack.js';
import { OutsideWorld } from '../helpers/outside-world.js';
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

  it('confines sandboxes by their egress policy with no variable set: rules installed by its pod-lifecycle', async () => {
    await timed('egress (three sandboxes, probes)', async () => {
      const world = await OutsideWorld.start();
      const open: Sandbox[] = [];
      let hostListener: Server | undefined;
      try {
        const create = async (name: string, egress?: Egress) => {
          const sandbox = await client!.sandboxes.create({
            id: `${stack.project}-${name}`,
            image: IMAGE,
            ...(egress ? { network: { egress } } : {}),
          });
          open.push(sandbox);
          return sandbox;
        };
        const internet = await create('internet');
        const none = await create('none', 'none');
        const allow = await create('allow', { allow: [`${world.publicAddr}:8080`] });
        const addressOf = (container: string) =>
          spawnSync(
            'docker',
            [
              'inspect',
              '-f',
              `{{(index .NetworkSettings.Networks "${stack.sandboxNetwork}").IPAddress}}`,
              container,
            ],
            { encoding: 'utf8' },
          ).stdout.trim();
        const api = stack.containerOf('api');
        // Something to refuse: a listener in two of them (perl-base is in the image), which the
        // api's container (the preview proxy's side) does reach, and one on every host address.
        const listenerAt = new Map<Sandbox, string>();
        for (const sandbox of [internet, none]) {
          const address = addressOf((await sandbox.info()).sandbox?.id ?? '');
          expect(address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
          listenerAt.set(sandbox, address);
          await sandbox.processes.start([
            'perl',
            '-MIO::Socket::INET',
            '-e',
            '$s = IO::Socket::INET->new(LocalPort => 7070, Listen => 5, ReuseAddr => 1) or die; while ($c = $s->accept) { close $c }',
          ]);
          const fromApi = `require('node:net').connect(7070, '${address}').on('connect', () => process.exit(0)).on('error', () => process.exit(1))`;
          await expect
            .poll(() => spawnSync('docker', ['exec', api, 'node', '-e', fromApi]).status, { timeout: 20_000 })
            .toBe(0);
        }
        hostListener = createServer((socket) => socket.destroy()).listen(0, '0.0.0.0');
        await once(hostListener, 'listening');
        const hostPort = (hostListener.address() as AddressInfo).port;
        const targets = {
          redis: `${stack.redisAddress}:6379`,
          gateway: `${stack.subnetPrefix}.1:${hostPort}`,
          api: `${addressOf(api)}:8080`,
          metadata: '169.254.169.254:80',
          allowed: `${world.publicAddr}:8080`,
          other: `${world.publicAddr}:9090`,
        };
        // bash's /dev/tcp: open on connect, closed on a refusal (the rules reject at once) or timeout.
        const probe = async (sandbox: Sandbox) => {
          // Another sandbox's listener: the one in `internet`, or from there the one in `none`.
          const neighbour = `${listenerAt.get(sandbox === internet ? none : internet)}:7070`;
          const script = Object.entries({ ...targets, neighbour })
            .map(([name, at]) => {
              const [host, port] = at.split(':');
              return `if timeout 3 bash -c '</dev/tcp/${host}/${port}' 2>/dev/null; then echo ${name}=open; else echo ${name}=closed; fi`;
            })
            .join('\n');
          const res = await sandbox.exec(['bash', '-c', script]);
          return Object.fromEntries(
            res.stdout
              .trim()
              .split('\n')
              .map((l) => l.split('=')),
          );
        };
        const closed = { gateway: 'closed', api: 'closed', neighbour: 'closed', metadata: 'closed' };
        expect(await probe(internet)).toEqual({ redis: 'open', ...closed, allowed: 'open', other: 'open' });
        expect(await probe(none)).toEqual({ redis: 'open', ...closed, allowed: 'closed', other: 'closed' });
        expect(await probe(allow)).toEqual({ redis: 'open', ...closed, allowed: 'open', other: 'closed' });
        expect((await allow.exec(['curl', '-sS', '-m', '5', `http://${targets.allowed}/`])).stdout).toBe(
          'hello from 8080\n',
        );
        // Changed on the running sandbox: the other port now, the first one no more.
        await allow.network.update({ egress: { allow: [`${world.publicAddr}:9090`] } });
        expect(await probe(allow)).toMatchObject({ allowed: 'closed', other: 'open' });
      } finally {
        await Promise.all(open.map((s) => s.close().catch(() => undefined)));
        world.close();
        hostListener?.close();
      }
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
