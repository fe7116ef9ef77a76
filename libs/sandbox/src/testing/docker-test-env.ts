import type Dockerode from 'dockerode';
import { SandboxLabels } from '../backend.js';
import { DockerRoleLabel } from '../docker/docker-names.js';
import { localCarrierImage } from '../docker/local-carrier-image.js';

/** Shared set-up of the Docker test files: the images they run and what a job left behind. */
export const testImages = {
  debian: process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm',
  busybox: process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static',
  carrier: process.env.SANDSTREAM_AGENT_CARRIER_IMAGE ?? localCarrierImage(),
};

export async function dockerLeftovers(docker: Dockerode, jobId: string): Promise<string[]> {
  const label = `${SandboxLabels.jobId}=${jobId}`;
  const containers = await docker.listContainers({ all: true, filters: { label: [label] } });
  const { Volumes } = await docker.listVolumes({ filters: { label: [label] } });
  return [
    ...containers.map((c) => `container ${c.Names.join(',')} (${c.Labels[DockerRoleLabel]})`),
    ...(Volumes ?? []).map((v) => `volume ${v.Name}`),
  ];
}
