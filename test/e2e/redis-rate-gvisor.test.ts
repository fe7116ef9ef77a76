import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { SANDBOX_USER_PREFIX } from '@sandstream/bus';
import type { Sandbox } from '@sandstream/client';
import { closeDefaultRedisUser, type RedisServer, startRedisServer } from '@sandstream/test-support';
import Dockerode from 'dockerode';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 28 §4 inside gVisor (Docker, runtime runsc): a sandbox pipelining XADDs to its own stream
// as its own Redis user is stopped with `redis-rate`, and a quiet neighbour (another gVisor
// sandbox) keeps its exec p50 within 2× of the same neighbour's, measured alone in the same run.
// The services on a private redis-server (the monitor reads Redis' command total), `default` off,
// a Redis user per sandbox; host network, so Redis is at 127.0.0.1. The rate limit is 5,000/s:
// a pipelined flood from inside gVisor measured 20,000-40,000 XADDs/s on a loaded node, too
// close to the default 30,000 to be told apart from it every time.
// Outside CI an engine without runsc skips this with the reason, as gvisor.test.ts does.
const image = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
const ci = process.env.CI === 'true';
const runtimes = await new Dockerode()
  .info()
  .then((info: { Runtimes?: Record<string, unknown> }) => Object.keys(info.Runtimes ?? {}))
  .catch(() => [] as string[]);
const skip = !ci && !runtimes.includes('runsc');
if (skip)
  process.stderr.write(
    '\n*** SKIPPING gvisor redis-rate e2e: no Docker engine with the runsc runtime ***\n\n',
  );

/**
 * Execs of `true` for the baseline, and how long the neighbour is measured from the flood's start:
 * 10 s, as test/bench/redis-rate.bench.ts measures it (the flood is stopped within seconds; a
 * flood never stopped weighs on the whole window).
 */
const ALONE_ROUNDS = 30;
const FLOOD_WINDOW_MS = 10_000;

const p50 = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

describe.skipIf(skip)(
  'a sandbox flooding Redis from inside gVisor is stopped; its neighbour is not slowed',
  () => {
    let server: RedisServer;
    let admin: Redis;
    let stack: Stack;

    beforeAll(async () => {
      server = await startRedisServer();
      const adminUrl = await closeDefaultRedisUser(server);
      admin = new Redis(adminUrl);
      const templates = join(mkdtempSync(join(tmpdir(), 'sandstream-gvisor-rate-')), 'templates.yaml');
      writeFileSync(templates, `templates:\n  gvisor:\n    image: ${image}\n    runtimeClass: gvisor\n`);
      stack = await startStack({
        label: 'grate',
        env: {
          REDIS_URL: adminUrl,
          SANDBOX_ACL: 'on',
          SANDBOX_TYPE: 'docker',
          SANDSTREAM_TEMPLATES_FILE: templates,
          SANDSTREAM_DOCKER_NETWORK: 'host',
          SANDBOX_REDIS_RATE_LIMIT: '5000',
        },
        redis: () => new Redis(adminUrl),
      });
    }, 60_000);

    afterAll(async () => {
      await stack?.stop();
      admin?.disconnect();
      await server?.stop();
    });

    /** Round trips of `exec('true')` in `sandbox` until `until` says stop; their durations in ms. */
    const execTimes = async (sandbox: Sandbox, until: () => boolean) => {
      const times: number[] = [];
      while (!until()) {
        const started = performance.now();
        expect((await sandbox.exec('true')).exitCode).toBe(0);
        times.push(performance.now() - started);
      }
      return times;
    };

    it('stops the flooder with redis-rate; the neighbour exec p50 stays within 2x of alone', async () => {
      const ns = stack.namespace;
      const floodId = `${ns}-flood`;
      const [flooder, neighbour] = await Promise.all([
        stack.client.sandboxes.create({ id: floodId, template: 'gvisor' }),
        stack.client.sandboxes.create({ id: `${ns}-quiet`, template: 'gvisor' }),
      ]);
      await using _flooder = flooder;
      await using _neighbour = neighbour;
      expect((await flooder.exec('uname -r')).stdout).toBe('4.4.0\n'); // gVisor's Sentry

      let rounds = 0;
      const alone = await execTimes(neighbour, () => rounds++ >= ALONE_ROUNDS);

      // Code in the sandbox holding its user's credentials (a second password added to the user
      // here; its rules untouched): one XADD trimmed to ~1,000 entries, doubled into 16,384 in a
      // file, sent over and over on one connection, replies discarded — a pipelined flood.
      const user = `${SANDBOX_USER_PREFIX}${floodId}`;
      await admin.call('ACL', 'SETUSER', user, '>test-only-password');
      const key = `sandbox:{${floodId}}:events`;
      const xadd = ['XADD', key, 'MAXLEN', '~', '1000', '*', 'f', 'v'];
      const resp = `*${xadd.length}\\r\\n${xadd.map((a) => `$${a.length}\\r\\n${a}\\r\\n`).join('')}`;
      const flood = [
        `printf '${resp}' > /tmp/c; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do cat /tmp/c /tmp/c > /tmp/d; mv /tmp/d /tmp/c; done`,
        // Connected again if a connection ends (under load one has ended before the stop came).
        `while true; do { printf 'AUTH ${user} test-only-password\\r\\n'`,
        `  while true; do cat /tmp/c; done; } | nc 127.0.0.1 ${server.port} > /dev/null; sleep 0.2; done`,
      ].join('\n');
      const started = Date.now();
      let stoppedAfter = 0;
      const running = Promise.resolve(flooder.exec(['sh', '-c', flood], { timeoutSeconds: 60 })).catch(
        () => undefined,
      );
      const [nextToFlood] = await Promise.all([
        execTimes(neighbour, () => Date.now() - started >= FLOOD_WINDOW_MS),
        expect
          .poll(async () => (await flooder.info()).state, { timeout: 30_000, interval: 100 })
          .toBe('failed')
          .then(() => {
            stoppedAfter = (Date.now() - started) / 1000;
          }),
      ]);
      const info = await flooder.info();
      expect(info.reason).toBe('redis-rate');
      const added = (await admin.call('XINFO', 'STREAM', key)) as unknown[];
      const ratio = p50(nextToFlood) / p50(alone);
      console.log(
        `[measure] gVisor XADD flood: stopped (seen failed) ${stoppedAfter.toFixed(1)} s after it began, ${Number(added[added.indexOf('entries-added') + 1]).toLocaleString('en-US')} entries added; neighbour exec p50 alone ${p50(alone).toFixed(1)} ms (${alone.length}), in the ${FLOOD_WINDOW_MS / 1000} s from the flood's start ${p50(nextToFlood).toFixed(1)} ms (${nextToFlood.length}): ${ratio.toFixed(2)}x`,
      );
      // The bound is on what the flood does through Redis. On a host whose CPUs are already
      // saturated (load above twice the CPUs: other suites on a shared runner), a gVisor flooder
      // slows its neighbour by the CPU its Sentry burns before Redis matters, and the figure
      // says nothing about the rate limit: it is printed, not asserted, there.
      const saturated = (loadavg()[0] ?? 0) > cpus().length * 2;
      if (saturated)
        console.log(
          `[measure] load ${loadavg()[0]?.toFixed(1)} on ${cpus().length} CPUs: p50 ratio not asserted`,
        );
      else expect(ratio).toBeLessThanOrEqual(2);
      expect((await neighbour.info()).state).toBe('ready');
      await running;
    }, 120_000);
  },
);
