import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Sandbox } from '@sandstream/client';
import { DockerBackend, SandboxSpecSchema, SandboxStartError } from '@sandstream/sandbox';
import {
  destroyTestSandbox,
  dockerEngine,
  findCarrierImage,
  type RedisServer,
  startRedisServer,
} from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 17 §1, tried as an attacker inside a real Docker sandbox would: the four services run as
// they ship (health endpoints on their defaults), on a private Redis with the `default` user off,
// and sandboxes join a bridge network; a step then knocks on every door it can name.
const carrier = findCarrierImage();
const { docker, skip } = await dockerEngine('docker-reach');
const image = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
const tag = randomBytes(3).toString('hex');
const network = `sandstream-test-reach-${tag}`;
const bridge = `sst-${tag}`;
const firewallScript = fileURLToPath(new URL('../../scripts/sandbox-firewall.sh', import.meta.url));
// The firewall half needs root and iptables; CI runs as root, so there it is never skipped.
const canFirewall =
  process.env.CI === 'true' ||
  (process.getuid?.() === 0 && spawnSync('iptables', ['-S', 'INPUT'], { stdio: 'ignore' }).status === 0);

/** busybox nc exits 0 once connected (stdin at EOF closes it), non-zero when refused or timed out. */
const PROBE =
  'probe() { if nc -w 2 "$1" "$2" </dev/null >/dev/null 2>&1; then echo "$3=open"; else echo "$3=closed"; fi; }';
/** Sends RESP commands over a raw connection and prints the replies on one line. */
const RESP = `resp() { printf "$3" | nc -w 2 "$1" "$2" | tr -d '\\r' | tr '\\n' ' '; echo; }`;

describe.skipIf(skip || (!carrier && process.env.CI !== 'true'))('Docker sandbox reach (issue 17 §1)', () => {
  let redis: RedisServer;
  let admin: Redis;
  let gateway = '';
  let adminUrl = '';
  let stack: Stack | undefined;
  const listeners: Server[] = [];

  const listen = (host: string) =>
    new Promise<number>((resolve, reject) => {
      const server = createServer((socket) => socket.end('hello\n'));
      server.once('error', reject);
      server.listen(0, host, () => {
        listeners.push(server);
        resolve((server.address() as { port: number }).port);
      });
    });

  beforeAll(async () => {
    // Made before Redis, as an operator would: Redis has to listen on the bridge's gateway (the
    // host's address on it), the one host address a sandbox on that bridge is sent to.
    await docker.createNetwork({
      Name: network,
      Driver: 'bridge',
      // A named interface, as the backend's own network has (sandstream0), for the firewall test.
      Options: { 'com.docker.network.bridge.enable_icc': 'false', 'com.docker.network.bridge.name': bridge },
      Labels: { 'app.kubernetes.io/managed-by': 'sandstream-test' },
    });
    const info = (await docker.getNetwork(network).inspect()) as { IPAM: { Config: { Gateway: string }[] } };
    gateway = info.IPAM.Config[0]?.Gateway as string;
    redis = await startRedisServer({ args: ['--bind', '127.0.0.1', gateway, '--protected-mode', 'no'] });
    admin = new Redis(redis.url);
    admin.on('error', () => {});
  });
  let neighbour: { remove: (o: { force: boolean }) => Promise<unknown> } | undefined;
  const startNeighbour = async () => {
    const container = await docker.createContainer({
      name: `sandstream-test-neighbour-${tag}`,
      Image: image,
      Cmd: ['sh', '-c', 'while true; do echo hi | nc -l -p 8080; done'],
      Labels: { 'app.kubernetes.io/managed-by': 'sandstream-test' },
      HostConfig: { NetworkMode: network },
    });
    neighbour = container;
    await container.start();
    const info = await container.inspect();
    return info.NetworkSettings.Networks[network]?.IPAddress as string;
  };
  const connects = (host: string, port: number) =>
    new Promise<boolean>((resolve) => {
      const socket = connect({ host, port, timeout: 2000 });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('timeout', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(false));
    });

  const firewall = (action: 'add' | 'remove') => {
    const run = spawnSync('bash', [firewallScript, action, bridge, String(redis.port)], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`sandbox-firewall.sh ${action}: ${run.stderr}`);
  };

  afterAll(async () => {
    if (canFirewall && redis) firewall('remove');
    await stack?.stop();
    await neighbour?.remove({ force: true }).catch(() => {});
    for (const l of listeners) l.close();
    admin?.disconnect();
    await redis?.stop();
    await docker
      .getNetwork(network)
      .remove()
      .catch(() => {});
  });

  const backendOn = (allowOpenRedis: boolean) =>
    new DockerBackend({
      docker,
      redis: admin,
      carrierImage: carrier ?? 'sandstream/agent-carrier:dev',
      defaultNetwork: network,
      allowOpenRedis,
      defaultGraceMs: 1000,
    });
  const request = (jobId: string) => ({
    jobId,
    tenant: 'reach',
    spec: SandboxSpecSchema.parse({ image }),
    // Loopback, as a workstation's REDIS_URL is: the backend sends the sandbox to the gateway.
    agent: { redisUrl: redis.url, keyStyle: 'tagged' as const, heartbeatIntervalMs: 200 },
  });

  it('refuses to create a sandbox while the Redis has an open default user, naming the fix; the override allows it', async () => {
    // First, while the server still has its stock open `default` user.
    const err = await backendOn(false)
      .create(request(`reach-open-${tag}`))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxStartError);
    expect((err as Error).message).toMatch(/open "default" user/);
    expect((err as Error).message).toMatch(/ACL SETUSER default off/);
    expect((err as Error).message).toMatch(/SANDSTREAM_ALLOW_OPEN_REDIS=1/);
    expect(
      await docker.listContainers({
        all: true,
        filters: { label: [`sandstream.dev/job-id=reach-open-${tag}`] },
      }),
    ).toEqual([]);

    const allowed = backendOn(true);
    const jobId = `reach-allowed-${tag}`;
    const ref = await allowed.create(request(jobId));
    try {
      await allowed.waitReady(ref, 30_000, {
        isAgentAlive: async () => (await admin.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
      });
      const inspected = await docker.getContainer(ref.id).inspect();
      expect(inspected.HostConfig.NetworkMode).toBe(network);
      expect(inspected.Config.Env).toContain(`REDIS_URL=redis://${gateway}:${redis.port}`);
    } finally {
      await destroyTestSandbox(admin, allowed, ref, 1000);
    }
  }, 60_000);

  it('from inside a sandbox: no host port but Redis, and on Redis nothing but its own user', async () => {
    // Close the door the way the fix message says, and give the services an admin user.
    const password = randomBytes(12).toString('hex');
    await admin.call('ACL', 'SETUSER', 'admin', 'on', `>${password}`, '~*', '&*', '+@all');
    await admin.call('ACL', 'SETUSER', 'default', 'off');
    admin.disconnect();
    adminUrl = `redis://admin:${password}@127.0.0.1:${redis.port}`;
    admin = new Redis(adminUrl);
    admin.on('error', () => {});

    stack = await startStack({
      label: 'reach',
      env: {
        REDIS_URL: adminUrl,
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
        SANDSTREAM_DOCKER_NETWORK: network,
        SANDBOX_ACL: 'on',
        // Small, so the flood below is told from normal use at once.
        SANDBOX_REDIS_BUDGET_MB: '64',
        REDIS_BUDGET_CHECK_MS: '100',
      },
      redis: () => new Redis(adminUrl),
    });
    const healthPorts = [...stack.services.values()].flat().map((s) => s.port);
    // The host's own external address, where one exists: reached through the gateway just the same.
    const hostIp = Object.entries(networkInterfaces())
      .filter(([name]) => !/^(docker|br-|veth|sst-|sandstream)/.test(name))
      .flatMap(([, addresses]) => addresses ?? [])
      .find((a) => a.family === 'IPv4' && !a.internal)?.address;
    const loopbackPort = await listen('127.0.0.1');
    // A neighbour on the same bridge (another sandbox, as far as the network can tell).
    const neighbourIp = await startNeighbour();
    // The control: the neighbour does answer, from the host (once its nc listens: a loaded
    // machine may take a moment to start it).
    await expect.poll(() => connects(neighbourIp, 8080), { timeout: 30_000 }).toBe(true);

    await using sandbox = await stack.client.sandboxes.create({ id: `${stack.namespace}-probe`, image });
    const own = await sandboxRedisUrl(`${stack.namespace}-probe`);
    // The agent's own user, not the admin: pod-lifecycle made one for this sandbox.
    expect(own.username).not.toBe('admin');
    expect(own.hostname).toBe(gateway);

    const targets = [
      ...healthPorts.map((p, i) => `probe ${gateway} ${p} health${i}; probe 127.0.0.1 ${p} health${i}-lo`),
      ...(hostIp ? healthPorts.map((p, i) => `probe ${hostIp} ${p} health${i}-ip`) : []),
      `probe ${gateway} ${loopbackPort} other; probe 127.0.0.1 ${loopbackPort} other-lo`,
      `probe ${neighbourIp} 8080 neighbour`,
      `probe ${gateway} ${redis.port} redis`,
      `resp ${gateway} ${redis.port} 'PING\\r\\n'`,
      `resp ${gateway} ${redis.port} 'AUTH default nopass\\r\\nPING\\r\\n'`,
      `resp ${gateway} ${redis.port} 'AUTH admin wrong\\r\\nPING\\r\\n'`,
      // Its own user: its own keys, and no other database (issue 28 §3).
      `resp ${gateway} ${redis.port} 'AUTH ${decodeURIComponent(own.username)} ${decodeURIComponent(own.password)}\\r\\nLLEN sandbox:{${stack.namespace}-probe}:in\\r\\nSELECT 1\\r\\nSWAPDB 0 1\\r\\n'`,
    ];
    const result = await sandbox.exec(['sh', '-c', [PROBE, RESP, ...targets].join('\n')]);
    const lines = result.stdout.trim().split('\n');
    if (process.env.REACH_DEBUG) console.log(result.stdout);
    for (let i = 0; i < healthPorts.length; i++) {
      expect(lines).toContain(`health${i}=closed`);
      expect(lines).toContain(`health${i}-lo=closed`);
      if (hostIp) expect(lines).toContain(`health${i}-ip=closed`);
    }
    expect(lines).toContain('other=closed');
    expect(lines).toContain('other-lo=closed');
    expect(lines).toContain('neighbour=closed');
    expect(lines).toContain('redis=open');
    const replies = lines.slice(-4);
    expect(replies[0]).toMatch(/^-NOAUTH/);
    expect(replies[1]).toMatch(/WRONGPASS|disabled/);
    expect(replies[2]).toMatch(/WRONGPASS/);
    expect(replies[3]).toMatch(
      /^\+OK :\d+ -NOPERM this user has no permissions to run the 'select' command -NOPERM this user has no permissions to run the 'swapdb' command ?$/,
    );
  }, 120_000);

  it.skipIf(!canFirewall)(
    'a host service on all interfaces is closed by the egress rules, and with the host firewall rule too; Redis still works',
    async () => {
      const live = stack as Stack;
      const allPort = await listen('0.0.0.0');
      const script = [PROBE, `probe ${gateway} ${allPort} all`, `probe ${gateway} ${redis.port} redis`].join(
        '\n',
      );
      await using sandbox = await live.client.sandboxes.create({ id: `${live.namespace}-fw`, image });
      // The sandbox's own egress rules close it already (issue 31); the operator's INPUT rule stays
      // a second layer, and neither closes Redis.
      expect((await sandbox.exec(['sh', '-c', script])).stdout.trim().split('\n')).toEqual([
        'all=closed',
        'redis=open',
      ]);
      firewall('add');
      firewall('add'); // idempotent: a second add must not stack rules
      expect((await sandbox.exec(['sh', '-c', script])).stdout.trim().split('\n')).toEqual([
        'all=closed',
        'redis=open',
      ]);
      // The agent kept its Redis connection through it: the exec above came back.
    },
    60_000,
  );

  /** The sandbox's own Redis URL (its user and password), as its container was given it. */
  const sandboxRedisUrl = async (jobId: string) => {
    const container = (
      await docker.listContainers({ filters: { label: [`sandstream.dev/job-id=${jobId}`] } })
    )[0];
    const env = (await docker.getContainer(container?.Id as string).inspect()).Config.Env;
    return new URL((env.find((e) => e.startsWith('REDIS_URL=')) as string).slice('REDIS_URL='.length));
  };

  const usedMemory = async () => Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))?.[1]);

  /**
   * A shell script for inside a sandbox: logs in as `own` (then SELECTs `db`, if given) and sends 1,024
   * LPUSHes of 1 MiB into `key`, as fast as the sandbox can send them.
   */
  const floodScript = (own: URL, key: string, db?: number) =>
    [
      `{ printf 'AUTH %s %s\\r\\n${db === undefined ? '' : `SELECT ${db}\\r\\n`}' '${decodeURIComponent(own.username)}' '${decodeURIComponent(own.password)}'`,
      `  i=0; while [ $i -lt 1024 ]; do`,
      `    printf '*3\\r\\n$5\\r\\nLPUSH\\r\\n$${key.length}\\r\\n${key}\\r\\n$1048576\\r\\n'`,
      `    head -c 1048576 /dev/zero; printf '\\r\\n'; i=$((i+1))`,
      `  done; } | nc -w 5 ${gateway} ${redis.port} > /dev/null`,
    ].join('\n');

  /**
   * Runs `flood` in the sandbox until the budget monitor stops the sandbox under it, sampling Redis'
   * used memory every 20 ms meanwhile; the highest seen, from `before`.
   */
  const floodUntilStopped = async (sandbox: Sandbox, flood: string, before: number) => {
    let peak = before;
    const sampling = setInterval(() => {
      usedMemory().then(
        (m) => {
          peak = Math.max(peak, m);
        },
        () => {},
      );
    }, 20);
    try {
      // The sandbox is stopped under the command: the call ends with the sandbox, not with the flood done.
      await sandbox.exec(['sh', '-c', flood]).then(
        () => undefined,
        () => undefined,
      );
      await expect.poll(async () => (await sandbox.info()).state, { timeout: 30_000 }).toBe('failed');
    } finally {
      clearInterval(sampling);
    }
    return peak;
  };

  it('a sandbox that tries to write 1 GB into its own keys cannot fill Redis: it is cut off and stopped (§2)', async () => {
    const live = stack as Stack;
    await using sandbox = await live.client.sandboxes.create({ id: `${live.namespace}-flood`, image });
    const own = await sandboxRedisUrl(`${live.namespace}-flood`);
    const before = await usedMemory();
    // Its own user, its own key: 1,024 LPUSHes of 1 MiB, as fast as the sandbox can send them.
    const key = `sandbox:{${live.namespace}-flood}:mine`;
    const peak = await floodUntilStopped(sandbox, floodScript(own, key), before);
    const info = await sandbox.info();
    expect(info.reason).toBe('redis-budget');
    expect(info.message).toMatch(
      /over its Redis budget: the sandbox stored [\d.,]+ MB in Redis, over its budget of 64 MB/,
    );
    // Nowhere near 1 GB ever reached Redis, and what it wrote is gone again.
    const mb = (n: number) => Math.round(n / (1024 * 1024));
    console.log(
      `[measure] flood of 1 GB: Redis peaked ${mb(peak - before)} MB above where it stood, budget 64 MB`,
    );
    expect(peak - before).toBeLessThan(512 * 1024 * 1024);
    await expect.poll(() => admin.exists(key), { timeout: 20_000 }).toBe(0);
    await expect.poll(usedMemory, { timeout: 20_000 }).toBeLessThan(before + 64 * 1024 * 1024);
  }, 120_000);

  it('a sandbox whose user may still SELECT (an ACL of an older deployment) pushing 1 GB into database 1 is cut off, and that is freed (issue 28 §3)', async () => {
    const live = stack as Stack;
    const id = `${live.namespace}-hop`;
    await using sandbox = await live.client.sandboxes.create({ id, image });
    const own = await sandboxRedisUrl(id);
    // What an older deployment's ACL allowed, and a user made then would still have.
    await admin.call('ACL', 'SETUSER', decodeURIComponent(own.username), '+select');
    const db1 = new Redis(`${adminUrl}/1`);
    db1.on('error', () => {});
    const before = await usedMemory();
    const key = `sandbox:{${id}}:elsewhere`;
    const peak = await floodUntilStopped(sandbox, floodScript(own, key, 1), before);
    const info = await sandbox.info();
    expect(info.reason).toBe('redis-budget');
    const mb = (n: number) => Math.round(n / (1024 * 1024));
    console.log(
      `[measure] flood of 1 GB into database 1: Redis peaked ${mb(peak - before)} MB above where it stood, budget 64 MB`,
    );
    expect(peak - before).toBeLessThan(512 * 1024 * 1024);
    try {
      await expect.poll(() => db1.exists(key), { timeout: 20_000 }).toBe(0);
    } finally {
      db1.disconnect();
    }
    await expect.poll(usedMemory, { timeout: 20_000 }).toBeLessThan(before + 64 * 1024 * 1024);
  }, 120_000);

  it('a sandbox sending XADDs to its own stream as fast as it can, kept under its budget, is cut off for its rate (issue 28 §4)', async () => {
    const live = stack as Stack;
    const id = `${live.namespace}-rate`;
    await using sandbox = await live.client.sandboxes.create({ id, image });
    const own = await sandboxRedisUrl(id);
    const key = `sandbox:{${id}}:events`;
    // One XADD trimmed to ~1,000 entries (its memory stays small), doubled into 16,384 in a file,
    // sent over and over on one connection as its own user, replies discarded: a pipelined flood.
    const xadd = ['XADD', key, 'MAXLEN', '~', '1000', '*', 'f', 'v'];
    const resp = `*${xadd.length}\\r\\n${xadd.map((a) => `$${a.length}\\r\\n${a}\\r\\n`).join('')}`;
    const flood = [
      `printf '${resp}' > /tmp/c; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do cat /tmp/c /tmp/c > /tmp/d; mv /tmp/d /tmp/c; done`,
      `{ printf 'AUTH %s %s\\r\\n' '${decodeURIComponent(own.username)}' '${decodeURIComponent(own.password)}'`,
      `  while true; do cat /tmp/c; done; } | nc ${gateway} ${redis.port} > /dev/null`,
    ].join('\n');
    const started = Date.now();
    const running = Promise.resolve(sandbox.exec(['sh', '-c', flood])).catch(() => undefined);
    await expect
      .poll(async () => (await sandbox.info()).state, { timeout: 60_000, interval: 100 })
      .toBe('failed');
    const info = await sandbox.info();
    expect(info.reason).toBe('redis-rate');
    const added = (await admin.call('XINFO', 'STREAM', key)) as unknown[];
    console.log(
      `[measure] XADD flood from Docker stopped after ${((Date.now() - started) / 1000).toFixed(1)} s, ${Number(added[added.indexOf('entries-added') + 1]).toLocaleString('en-US')} entries added: ${info.message}`,
    );
    await running;
  }, 120_000);
});
