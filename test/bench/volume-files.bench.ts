/**
 * `client.volumes.files(name)` runs each call in a short-lived helper sandbox (docs/volumes.md).
 * Its cost against a baseline measured in the same run: what the same caller pays doing it by
 * hand — create a sandbox mounting the volume, one file step, close. The ratio should be ~1 (the
 * helper is exactly that); the absolute figure is the price of the design choice.
 * The four services as processes on the shared Redis, under a fresh namespace.
 *
 *   npm run build && npx vite-node test/bench/volume-files.bench.ts [rounds] [inprocess|docker]
 */
import { spawnSync } from 'node:child_process';
import { SandstreamClient } from '@sandstream/client';
import {
  deleteNamespaceKeys,
  findCarrierImage,
  startServices,
  summarize,
  testRedisUrl,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';

const ROUNDS = Number(process.argv[2] ?? 10);
const BACKEND = process.argv[3] ?? 'inprocess';
const image = BACKEND === 'docker' ? 'sandstream/debian:bookworm' : 'debian:bookworm-slim';

const namespace = uniqueNamespace('vbench');
const redisUrl = testRedisUrl();
const services = await startServices({
  SANDSTREAM_NAMESPACE: namespace,
  REDIS_URL: redisUrl,
  SANDBOX_TYPE: BACKEND,
  REAPER_JOB_GLOB: `${namespace}-*`,
  ...(BACKEND === 'docker'
    ? {
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: findCarrierImage() ?? 'sandstream/agent-carrier:dev',
      }
    : {}),
});
const client = new SandstreamClient({ redisUrl, namespace, volumeHelperImage: image });
const volume = await client.volumes.create({ name: 'bench' });
try {
  await client.volumes.files('bench').write('f.txt', 'x'.repeat(1024));
  const helper: number[] = [];
  const byHand: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    let t = performance.now();
    await client.volumes.files('bench').read('f.txt');
    helper.push(performance.now() - t);
    t = performance.now();
    const box = await client.sandboxes.create({
      id: `${namespace}-hand-${i}`,
      image,
      volumes: [{ name: 'bench', mountPath: '/volume', readOnly: true }],
    });
    await box.files.read('/volume/f.txt');
    await box.close();
    byHand.push(performance.now() - t);
  }
  const a = summarize(helper);
  const b = summarize(byHand);
  console.log(
    `${BACKEND}: volumes.files().read p50 ${a.p50.toFixed(0)} ms (p99 ${a.p99.toFixed(0)}), by hand (create+read+close) p50 ${b.p50.toFixed(0)} ms (p99 ${b.p99.toFixed(0)}); ratio ${(a.p50 / b.p50).toFixed(2)}x over ${ROUNDS} rounds`,
  );
} finally {
  await client.volumes.delete('bench').catch(() => undefined);
  await client.close();
  for (const s of services) await s.stop(15_000);
  // The reaper would remove it on its next pass; the services are gone before that.
  if (BACKEND === 'docker') spawnSync('docker', ['volume', 'rm', '-f', `sandstream-vol-${volume.uid}`]);
  const redis = new Redis(redisUrl);
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
}
