import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { type Sandbox, SandboxClosedError, SandboxPausedError } from '@sandstream/client';
import { dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SandboxLabels } from '../libs/sandbox/src/backend.js';
import { type KubeStack, startKubeStack, writeStandinKubeconfig } from './helpers/kube-stack.js';
import { checksums, expectedChecksums, sha256 } from './helpers/workspace-checksums.js';
import { type KubeApiStandin, startKubeApiStandin } from './kube-api-standin/index.js';
import { images } from './kubernetes-test-env.js';

/**
 * Pause and resume, snapshots and forks on the Kubernetes backend (issue 30 §3, §7), end to end:
 * the four services as processes with SANDBOX_TYPE=kubernetes against the API stand-in (pods are
 * Docker containers, pods/exec a `docker exec`), the snapshot store in the machine's NATS
 * JetStream, driven through the SDK. A paused sandbox has no pod and holds no slot; what was
 * written up to the pause is there after the resume, over ten cycles.
 */
const { docker, skip } = await dockerEngine('kubernetes-pause-resume');
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

describe.skipIf(skip)(
  'pause, resume, snapshots and forks on the Kubernetes backend (kube-api-standin)',
  () => {
    let standin: KubeApiStandin;
    let stack: KubeStack;
    let redis: Redis;
    const scratch = mkdtempSync(join(tmpdir(), 'k8s-pause-'));
    const namespace = 'sandstream-pause';
    const prefix = `k8spause-${randomBytes(4).toString('hex')}`;

    beforeAll(async () => {
      standin = await startKubeApiStandin({ docker });
      stack = await startKubeStack({
        SANDBOX_TYPE: 'kubernetes',
        // The shared test Redis has an open `default` user (the guard: open-redis.test.ts).
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        KUBECONFIG: writeStandinKubeconfig(standin, scratch, namespace),
        SANDSTREAM_K8S_NAMESPACE: namespace,
        SANDSTREAM_AGENT_CARRIER_IMAGE: images.carrier,
        NATS_URL: natsUrl,
        SCHEDULER_GLOBAL_SLOTS: '8',
        SCHEDULER_TENANT_SLOTS: '8',
        DESTROY_GRACE_SECONDS: '3',
        REAPER_INTERVAL_SECONDS: '1',
        REAPER_JOB_GLOB: `${prefix}-*`,
        SANDSTREAM_INSTALLATION: prefix,
      });
      redis = new Redis(testRedisUrl());
    }, 240_000);

    afterAll(async () => {
      redis?.disconnect();
      await stack?.stop();
      await standin?.close();
      rmSync(scratch, { recursive: true, force: true });
    });

    const podsOf = async (sandboxId: string) => {
      const core = standin.kubeConfig(namespace).makeApiClient(CoreV1Api);
      return (await core.listNamespacedPod({ namespace })).items.filter(
        (p) => p.metadata?.labels?.[SandboxLabels.jobId] === sandboxId,
      );
    };
    const holdsSlot = async (sandboxId: string) =>
      (await redis.zscore(`{${stack.namespace}:leases}:global`, sandboxId)) !== null;

    it('keeps every write over 10 pause/resume cycles; a paused sandbox has no pod and no slot', async () => {
      let sandbox = await stack.client.sandboxes.create({
        id: `${prefix}-cycles`,
        image: images.debian,
        tenant: 'k8s-pause',
        env: { KEPT: 'yes' },
        labels: { purpose: 'cycles' },
      });
      await sandbox.exec('mkdir -p data');
      const pods = new Set((await podsOf(sandbox.id)).map((p) => p.metadata?.uid));
      expect(pods.size).toBe(1);
      const expected = new Map<string, string>();
      for (let cycle = 1; cycle <= 10; cycle++) {
        const blob = randomBytes(32 * 1024 + cycle);
        await sandbox.files.write(`data/blob-${cycle}.bin`, blob);
        expected.set(`./blob-${cycle}.bin`, sha256(blob));
        await sandbox.exec(`echo cycle ${cycle} >> data/log.txt`);
        expected.set(
          './log.txt',
          sha256(Array.from({ length: cycle }, (_, i) => `cycle ${i + 1}\n`).join('')),
        );
        // The write right before the pause: nothing between them.
        const last = `written right before pause ${cycle}`;
        await sandbox.files.write('data/last.txt', last);
        expected.set('./last.txt', sha256(last));

        const paused = await sandbox.pause();
        expect(paused.sandbox).toMatchObject({
          id: sandbox.id,
          state: 'paused',
          labels: { purpose: 'cycles' },
        });
        expect(await holdsSlot(sandbox.id)).toBe(false);
        // Its pod is deleted (the stand-in removes it with its containers and volume).
        await expect
          .poll(async () => (await podsOf(sandbox.id)).length, { timeout: 30_000, interval: 200 })
          .toBe(0);
        await expect(sandbox.exec('true')).rejects.toBeInstanceOf(SandboxClosedError);

        if (cycle % 2 === 0) sandbox = await stack.client.sandboxes.resume(sandbox.id);
        else await sandbox.resume();
        expect(await sandbox.info()).toMatchObject({ id: sandbox.id, state: 'ready', resumes: cycle });
        expect(await holdsSlot(sandbox.id)).toBe(true);
        // A new pod each time, not the old one kept.
        const now = await podsOf(sandbox.id);
        expect(now).toHaveLength(1);
        expect(pods.has(now[0]?.metadata?.uid)).toBe(false);
        pods.add(now[0]?.metadata?.uid);
        expect(await checksums(sandbox)).toBe(expectedChecksums(expected));
        expect((await sandbox.exec('echo $KEPT')).stdout).toBe('yes\n');
      }
      await sandbox.close();
      await expect
        .poll(async () => (await podsOf(sandbox.id)).length, { timeout: 60_000, interval: 250 })
        .toBe(0);
    }, 400_000);

    it("pauses itself when idle with onIdle 'pause'; connect says so, connect({ resume }) brings it back", async () => {
      const sandbox = await stack.client.sandboxes.create({
        id: `${prefix}-idle`,
        image: images.busybox,
        tenant: 'k8s-pause',
        idleTimeoutSeconds: 2,
        onIdle: 'pause',
      });
      await sandbox.files.write('idle.txt', 'before the idle pause');
      await vi.waitUntil(async () => (await sandbox.info()).state === 'paused', {
        timeout: 60_000,
        interval: 250,
      });
      expect(await podsOf(sandbox.id)).toHaveLength(0);
      await expect(stack.client.sandboxes.connect(sandbox.id)).rejects.toBeInstanceOf(SandboxPausedError);
      const back = await stack.client.sandboxes.connect(sandbox.id, { resume: true });
      expect(await back.files.read('idle.txt')).toBe('before the idle pause');
      await back.close();
    }, 120_000);

    it('snapshots a pod, restores it in place, starts a sandbox from it and forks it', async () => {
      const source = await stack.client.sandboxes.create({
        id: `${prefix}-snap`,
        image: images.debian,
        tenant: 'k8s-pause',
      });
      const open: Sandbox[] = [source];
      try {
        await source.exec('mkdir project && echo "Hello World" > project/hello.txt');
        const taken = await source.snapshot({ name: 'before' });
        expect(taken.snapshotId).toBeTruthy();
        await source.exec('rm -r project');
        await source.restore(taken.snapshotId);
        expect((await source.exec('cat project/hello.txt')).stdout).toBe('Hello World\n');

        const copy = await stack.client.sandboxes.create({
          tenant: 'k8s-pause',
          fromSnapshot: taken.snapshotId,
        });
        open.push(copy);
        expect((await copy.exec('cat project/hello.txt')).stdout).toBe('Hello World\n');

        await source.exec('echo source > state.txt');
        const forks = await source.fork({ count: 2 });
        open.push(...forks);
        await Promise.all(forks.map((f, i) => f.exec(`echo ${i} >> state.txt`)));
        const states = await Promise.all(forks.map(async (f) => (await f.exec('cat state.txt')).stdout));
        expect(states).toEqual(['source\n0\n', 'source\n1\n']);
        expect((await source.exec('cat state.txt')).stdout).toBe('source\n');
        // Each fork is a pod of its own.
        for (const f of forks) expect(await podsOf(f.id)).toHaveLength(1);
      } finally {
        await Promise.all(open.map((s) => s.close().catch(() => undefined)));
      }
    }, 240_000);
  },
);
