import type Dockerode from 'dockerode';
import type { FilesCapture, FilesRestored } from '../backend.js';
import { freezeByExec, thawByExec } from '../snapshot/signal-tree.js';
import { captureWorkByTar, restoreWorkByTar } from '../snapshot/work-tar.js';
import { ignoreGone } from './docker-errors.js';
import { dockerExec } from './docker-exec.js';
import { captureDocker, containerLayout, restoreDocker } from './docker-snapshot.js';

/**
 * Which way a Docker sandbox's files are captured and restored. Under runc the host sees the
 * container's files as the container does, so they are read and written in the engine's
 * directories (docker-snapshot.ts: container layer and work volume). Under gVisor (runsc) the
 * Sentry keeps its own cache of the root file system: a host write into the layer is not seen
 * inside (docs/snapshots.md), so the work volume is read and written by `tar` run in the container
 * through `docker exec` (snapshot/work-tar.ts, as on Kubernetes), its processes stopped by SIGSTOP
 * from inside meanwhile (a `docker pause`d container takes no exec).
 */
export interface DockerFilesRoute {
  kind: 'host' | 'exec';
  containerId: string;
  /** The work volume's mount point: the container's working directory. */
  workdir: string;
}

/**
 * `gvisorRuntimes`: the engine's names for gVisor (`runsc`, and whatever the backend's runtime
 * map calls it): a container on one of them goes through the container.
 */
export async function dockerFilesRoute(
  docker: Dockerode,
  containerId: string,
  gvisorRuntimes: ReadonlySet<string>,
): Promise<DockerFilesRoute> {
  const info = await docker.getContainer(containerId).inspect();
  const workdir = info.Config.WorkingDir || '/work';
  const runtime = info.HostConfig?.Runtime ?? '';
  if (!gvisorRuntimes.has(runtime)) return { kind: 'host', containerId, workdir };
  if (!info.State.Running) throw new Error(`container ${containerId.slice(0, 12)} is not running`);
  const mounts = (info.Mounts ?? []) as Array<{ Destination: string }>;
  if (!mounts.some((m) => m.Destination === workdir))
    throw new Error(`container ${containerId.slice(0, 12)} has no volume at ${workdir}`);
  return { kind: 'exec', containerId, workdir };
}

/** What a gVisor Docker sandbox is, in the refusal of a snapshot with more than a work tree. */
const GVISOR_SANDBOX = 'a gVisor (runsc) Docker sandbox';

export async function captureDockerFiles(docker: Dockerode, route: DockerFilesRoute): Promise<FilesCapture> {
  if (route.kind === 'host')
    return captureDocker(await containerLayout(docker, route.containerId, route.workdir));
  const exec = dockerExec(docker, route.containerId);
  return captureWorkByTar(exec, route.workdir, () => freezeByExec(exec));
}

export async function restoreDockerFiles(
  docker: Dockerode,
  route: DockerFilesRoute,
  snapshot: AsyncIterable<Buffer>,
): Promise<FilesRestored> {
  if (route.kind === 'host')
    return restoreDocker(await containerLayout(docker, route.containerId, route.workdir), snapshot);
  const exec = dockerExec(docker, route.containerId);
  return restoreWorkByTar(exec, route.workdir, snapshot, () => freezeByExec(exec), GVISOR_SANDBOX);
}

/**
 * Lets a sandbox run again that a capture or restore left frozen: unpaused (runc), or SIGCONT to
 * its processes from inside (gVisor). A container gone or stopped has nothing left frozen.
 */
export async function thawDockerFiles(
  docker: Dockerode,
  containerId: string,
  gvisorRuntimes: ReadonlySet<string>,
): Promise<void> {
  const container = docker.getContainer(containerId);
  await ignoreGone(async () => {
    const info = await container.inspect();
    if (info.State.Paused) await container.unpause();
    if (info.State.Running && gvisorRuntimes.has(info.HostConfig?.Runtime ?? ''))
      await thawByExec(dockerExec(docker, containerId));
  });
}
