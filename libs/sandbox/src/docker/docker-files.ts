import type Dockerode from 'dockerode';
import type { FilesCapture, FilesRestored } from '../backend.js';
import { freezeByExec, thawByExec } from '../snapshot/signal-tree.js';
import { captureWorkByTar, restoreWorkByTar } from '../snapshot/work-tar.js';
import { ignoreGone } from './docker-errors.js';
import { dockerExec } from './docker-exec.js';
import { captureDocker, containerLayout, restoreDocker } from './docker-snapshot.js';
import type { GvisorFileAccess } from './gvisor-file-access.js';

/**
 * Which way a Docker sandbox's files are captured and restored. Under runc, and under gVisor
 * (runsc) started with `--file-access=shared`, the host sees the container's files as the
 * container does, so they are read and written in the engine's directories (docker-snapshot.ts:
 * container layer and work volume), the container paused meanwhile. Under runsc's default
 * (`--file-access=exclusive`) the Sentry keeps its own cache of the root file system: a host
 * write into the layer is not seen inside (docs/snapshots.md), so the work volume is read and
 * written by `tar` run in the container through `docker exec` (snapshot/work-tar.ts, as on
 * Kubernetes), its processes stopped by SIGSTOP from inside meanwhile (a `docker pause`d container
 * takes no exec).
 */
export interface DockerFilesRoute {
  kind: 'host' | 'exec';
  containerId: string;
  /** The work volume's mount point: the container's working directory. */
  workdir: string;
}

/** `gvisor`: which containers are gVisor ones whose root the host's writes do not reach (gvisor-file-access.ts). */
export async function dockerFilesRoute(
  docker: Dockerode,
  containerId: string,
  gvisor: GvisorFileAccess,
): Promise<DockerFilesRoute> {
  const info = await docker.getContainer(containerId).inspect();
  const workdir = info.Config.WorkingDir || '/work';
  if ((await gvisor.of(info)) !== 'gvisor-exclusive') return { kind: 'host', containerId, workdir };
  if (!info.State.Running) throw new Error(`container ${containerId.slice(0, 12)} is not running`);
  const mounts = (info.Mounts ?? []) as Array<{ Destination: string }>;
  if (!mounts.some((m) => m.Destination === workdir))
    throw new Error(`container ${containerId.slice(0, 12)} has no volume at ${workdir}`);
  return { kind: 'exec', containerId, workdir };
}

/** What a gVisor Docker sandbox is, in the refusal of a snapshot with more than a work tree. */
const GVISOR_SANDBOX = 'a gVisor (runsc) Docker sandbox without --file-access=shared';

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
 * Lets a sandbox run again that a capture or restore left frozen: unpaused (runc, gVisor shared),
 * or SIGCONT to its processes from inside (gVisor exclusive). A container gone or stopped has
 * nothing left frozen.
 */
export async function thawDockerFiles(
  docker: Dockerode,
  containerId: string,
  gvisor: GvisorFileAccess,
): Promise<void> {
  const container = docker.getContainer(containerId);
  await ignoreGone(async () => {
    const info = await container.inspect();
    if (info.State.Paused) await container.unpause();
    if (info.State.Running && (await gvisor.of(info)) === 'gvisor-exclusive')
      await thawByExec(dockerExec(docker, containerId));
  });
}
