import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { DockerBackend, SandboxSpecSchema } from '@sandstream/sandbox';
import { dockerEngine, findCarrierImage, type RedisServer, startRedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Issue 31 §2, IPv6: the Docker egress rules are iptables' only (docs/sandbox-backends.md, "Egress
 * rules"), so a sandbox on a bridge with IPv6 on could leave by IPv6 unchecked. Such a network is
 * refused at create, saying why, and nothing is left behind: tried on a real IPv6 bridge.
 */
const carrier = findCarrierImage();
const { docker, skip: noDocker } = await dockerEngine('docker-egress-ipv6');
const canFirewall =
  process.getuid?.() === 0 && spawnSync('iptables', ['-w', '-S', 'INPUT'], { stdio: 'ignore' }).status === 0;
const tag = randomBytes(3).toString('hex');
const network = `sandstream-test-ipv6-${tag}`;

describe.skipIf(noDocker || !canFirewall || (!carrier && process.env.CI !== 'true'))(
  'Docker egress on an IPv6 sandbox network',
  () => {
    let redis: RedisServer;
    let admin: Redis;
    let gateway = '';

    beforeAll(async () => {
      const octet = 16 + (Number.parseInt(tag.slice(0, 2), 16) % 200);
      await docker.createNetwork({
        Name: network,
        Driver: 'bridge',
        EnableIPv6: true,
        IPAM: {
          Config: [
            { Subnet: `10.215.${octet}.0/24`, Gateway: `10.215.${octet}.1` },
            { Subnet: `fd00:5a5d:${tag.slice(0, 4)}::/64` },
          ],
        },
        Labels: { 'app.kubernetes.io/managed-by': 'sandstream-test' },
      });
      gateway = `10.215.${octet}.1`;
      redis = await startRedisServer({ args: ['--bind', '127.0.0.1', gateway, '--protected-mode', 'no'] });
      admin = new Redis(redis.url);
      admin.on('error', () => {});
    }, 60_000);

    afterAll(async () => {
      admin?.disconnect();
      await redis?.stop();
      await docker
        .getNetwork(network)
        .remove()
        .catch(() => {});
    });

    it('refuses a sandbox there, for every policy, naming the network and why; no container is left', async () => {
      const backend = new DockerBackend({
        docker,
        redis: admin,
        carrierImage: carrier ?? 'sandstream/agent-carrier:dev',
        defaultNetwork: network,
        allowOpenRedis: true,
        defaultGraceMs: 1000,
      });
      try {
        for (const egress of ['internet', 'none', { allow: ['203.0.113.0/24'] }] as const) {
          const jobId = `ipv6-${tag}-${typeof egress === 'string' ? egress : 'allow'}`;
          await expect(
            backend.create({
              jobId,
              tenant: 'egress',
              spec: SandboxSpecSchema.parse({ image: 'sandstream/busybox:static', network: { egress } }),
              agent: { redisUrl: redis.url, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
            }),
          ).rejects.toMatchObject({
            reason: 'backend_error',
            message: expect.stringMatching(
              /^the sandbox network \(\S+\) has IPv6 on; the egress rules are IPv4 only, so a sandbox could leave by IPv6: use a network without IPv6$/,
            ),
          });
          expect(
            await docker.listContainers({
              all: true,
              filters: { label: [`sandstream.dev/job-id=${jobId}`] },
            }),
          ).toEqual([]);
        }
      } finally {
        await backend.close();
      }
    }, 60_000);
  },
);
