import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { createKeySpace, WarmPoolStore } from '@sandstream/bus';
import { dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { SandboxLabels } from '../libs/sandbox/src/backend.js';
import { outputLines } from './e2e/job-helpers.js';
import { type KubeStack, startKubeStack, writeStandinKubeconfig } from './helpers/kube-stack.js';
import { type KubeApiStandin, startKubeApiStandin } from './kube-api-standin/index.js';
import { images } from './kubernetes-test-env.js';

/**
 * Warm pools on the Kubernetes backend: the four services as processes with SANDBOX_TYPE=kubernetes
 * against the API stand-in (pods run on Docker). Members are pods whose agent waits for a claim;
 * a job naming the pool's template runs in one, and its pod goes with the job.
 */
const { docker, skip } = await dockerEngine('kubernetes-warm-pools');

describe.skipIf(skip)('warm pools on the Kubernetes backend (kube-api-standin)', () => {
  let standin: KubeApiStandin;
  let stack: KubeStack;
  let redis: Redis;
  const scratch = mkdtempSync(join(tmpdir(), 'k8s-pools-'));
  const namespace = 'sandstream-pools';

  beforeAll(async () => {
    standin = await startKubeApiStandin({ docker });
    const kubeconfig = writeStandinKubeconfig(standin, scratch, namespace);
    const templates = join(scratch, 'templates.yaml');
    writeFileSync(
      templates,
      stringify({ templates: { pooled: { image: images.busybox, pool: { min: 1, max: 2 } } } }),
    );
    stack = await startKubeStack({
      SANDBOX_TYPE: 'kubernetes',
      SANDSTREAM_ALLOW_OPEN_REDIS: '1',
      KUBECONFIG: kubeconfig,
      SANDSTREAM_K8S_NAMESPACE: namespace,
      SANDSTREAM_AGENT_CARRIER_IMAGE: images.carrier,
      SANDSTREAM_TEMPLATES_FILE: templates,
      POOL_KEEPER_INTERVAL_MS: '200',
      DESTROY_GRACE_SECONDS: '3',
      // This run's reaper leaves every other suite's jobs alone.
      REAPER_JOB_GLOB: 'k8s-pools-none-*',
    });
    redis = new Redis(testRedisUrl());
  }, 240_000);

  afterAll(async () => {
    await stack?.stop();
    redis?.disconnect();
    // Removes every container and volume it ran, members included.
    await standin?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('runs a job in a member pod, bound late, and deletes that pod with the job', async () => {
    const pools = new WarmPoolStore(redis, createKeySpace(stack.namespace));
    const ready = async () => (await pools.all()).filter((m) => m.state === 'ready');
    await expect.poll(async () => (await ready()).length, { timeout: 120_000, interval: 250 }).toBe(1);
    const core = standin.kubeConfig(namespace).makeApiClient(CoreV1Api);
    const podsOf = async (id: string) =>
      (await core.listNamespacedPod({ namespace, labelSelector: `${SandboxLabels.jobId}=${id}` })).items;
    const [member] = await ready();
    expect(await podsOf(member?.id as string)).toHaveLength(1);

    const { jobId } = await stack.client.submit({
      id: `${stack.namespace}-job`,
      template: 'pooled',
      env: { BOUND: 'late' },
      steps: [{ command: 'sh', args: ['-c', 'echo in a pod $BOUND'] }],
    });
    const record = await stack.client.wait(jobId, { timeoutMs: 60_000 });
    expect(record.state, stack.logs().slice(-4000)).toBe('succeeded');
    expect(record.sandbox?.start).toEqual({ kind: 'warm' });
    expect(record.sandbox?.member).toBe(member?.id);
    expect(await outputLines(stack.client, jobId)).toEqual(['step-1:in a pod late']);
    await expect.poll(async () => (await podsOf(member?.id as string)).length, { timeout: 60_000 }).toBe(0);
  }, 240_000);
});
