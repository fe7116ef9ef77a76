import { CoreV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import { findCarrierImage } from '@sandstream/test-support';
import type Dockerode from 'dockerode';
import { sandboxPodName } from '../libs/sandbox/src/kubernetes/index.js';
import type { KubeApiStandin } from './kube-api-standin/index.js';

export const images = {
  debian: process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm',
  busybox: process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static',
  carrier: findCarrierImage() ?? 'sandstream/agent-carrier:dev',
};

/** Everything of one job still present: API objects labelled with its job id, and its Docker containers and volumes. */
export async function kubernetesLeftovers(
  standin: KubeApiStandin,
  docker: Dockerode,
  namespace: string,
  jobId: string,
): Promise<string[]> {
  const kc = standin.kubeConfig(namespace);
  const core = kc.makeApiClient(CoreV1Api);
  const networking = kc.makeApiClient(NetworkingV1Api);
  const selector = `sandstream.dev/job-id=${jobId}`;
  const podName = sandboxPodName(jobId);
  const [pods, secrets, policies] = await Promise.all([
    core.listNamespacedPod({ namespace, labelSelector: selector }),
    core.listNamespacedSecret({ namespace, labelSelector: selector }),
    networking.listNamespacedNetworkPolicy({ namespace, labelSelector: selector }),
  ]);
  const dockerFilter = { label: [`kube-standin/pod=${podName}`, `kube-standin/namespace=${namespace}`] };
  const containers = await docker.listContainers({ all: true, filters: dockerFilter });
  const { Volumes } = await docker.listVolumes({ filters: dockerFilter });
  return [
    ...pods.items.map((p) => `pod ${p.metadata?.name}`),
    ...secrets.items.map((s) => `secret ${s.metadata?.name}`),
    ...policies.items.map((p) => `networkpolicy ${p.metadata?.name}`),
    ...containers.map((c) => `container ${c.Names.join(',')}`),
    ...(Volumes ?? []).map((v) => `volume ${v.Name}`),
  ];
}
