import { randomBytes } from 'node:crypto';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { dockerEngine } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PodInformer } from '../libs/sandbox/src/kubernetes/pod-watch.js';
import { type KubeApiStandin, startKubeApiStandin } from './kube-api-standin/index.js';
import { images } from './kubernetes-test-env.js';

/**
 * The backend's pod watch must survive what real API servers do to long watches: close them,
 * refuse them for a while, and compact away the resourceVersion the client would resume from.
 */
const { docker, skip } = await dockerEngine('kubernetes-pod-watch');
const namespace = `watch-${randomBytes(4).toString('hex')}`;

describe.skipIf(skip)('PodInformer against kube-api-standin', () => {
  let standin: KubeApiStandin;
  let core: CoreV1Api;

  beforeAll(async () => {
    // A tiny history, so that a few changes while disconnected make the old version "410 Gone".
    standin = await startKubeApiStandin({ docker, watchHistory: 4 });
    core = standin.kubeConfig(namespace).makeApiClient(CoreV1Api);
  });
  afterAll(async () => {
    await standin?.close();
  });

  it('resumes after dropped and refused watches, and re-reads the pod after 410 Gone', async () => {
    const name = `w-${randomBytes(3).toString('hex')}`;
    await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name },
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image: images.busybox, command: ['/bin/sh', '-c', 'sleep 2'] }],
        },
      },
    });
    const phases: string[] = [];
    let sawRunning: () => void = () => {};
    const running = new Promise<void>((r) => {
      sawRunning = r;
    });
    let sawEnd: () => void = () => {};
    const ended = new Promise<void>((r) => {
      sawEnd = r;
    });
    const pods = new PodInformer({ kubeConfig: standin.kubeConfig(namespace), core, namespace });
    const handle = pods.watch(name, {
      onPod: (pod: V1Pod) => {
        phases.push(pod.status?.phase ?? '?');
        if (pod.status?.phase === 'Running') sawRunning();
        if (pod.status?.phase === 'Succeeded') sawEnd();
      },
      onGone: () => {},
    });
    try {
      await running;
      const before = standin.requests.length;
      // Disconnect the watcher and keep it out while more changes than the history holds happen.
      standin.refuseWatches(true);
      standin.dropWatches();
      for (let i = 0; i < 6; i++) {
        await core.createNamespacedSecret({
          namespace,
          body: { metadata: { name: `${name}-s${i}` }, stringData: { k: 'v' } },
        });
      }
      // Let it be refused twice (the re-watch right after the drop, then a retry after backoff)
      // before the stand-in takes watches again: the retry is what is under test.
      const watchesSince = () =>
        standin.requests.slice(before).filter((r) => r.includes('watch=true')).length;
      await expect.poll(watchesSince, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
      standin.refuseWatches(false);
      await ended;
      const after = standin.requests.slice(before);
      // Refused attempts were retried, the stale version got 410, and the pod was read afresh.
      expect(after.filter((r) => r.includes('watch=true')).length).toBeGreaterThanOrEqual(2);
      const lists = after.filter(
        (r) => r.split('?')[0] === `GET /api/v1/namespaces/${namespace}/pods` && !r.includes('watch='),
      );
      expect(lists).toHaveLength(1);
      expect(phases.at(-1)).toBe('Succeeded');
    } finally {
      handle.stop();
      await pods.stop();
      await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
    }
  });
});
