import Dockerode from 'dockerode';
import { SandboxLabels } from '../backend.js';
import { DockerRoleLabel } from './docker-names.js';

/**
 * Shared set-up of the Docker test files: whether an engine answers, and what a job left behind.
 * Outside CI a machine without Docker skips those tests; in CI (CI=true) they must run.
 */
export async function dockerEngine(): Promise<{ docker: Dockerode; skip: string | false }> {
  const docker = new Dockerode();
  try {
    await docker.ping();
    return { docker, skip: false };
  } catch (err) {
    if (process.env.CI === 'true') return { docker, skip: false };
    return { docker, skip: `no Docker engine answers (${(err as Error).message})` };
  }
}

export const testImages = {
  debian: process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm',
  busybox: process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static',
  carrier: process.env.SANDSTREAM_AGENT_CARRIER_IMAGE ?? 'sandstream/agent-carrier:dev',
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
