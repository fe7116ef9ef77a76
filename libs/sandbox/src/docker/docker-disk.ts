import { access } from 'node:fs/promises';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import type { SandboxDiskUsage } from '../backend.js';
import { allocatedBytes } from '../disk-usage.js';
import { isNotFound } from './docker-errors.js';

/** On the toolchain container: its disk limit in bytes, so any replica can judge its use. */
export const DiskLimitLabel = 'sandstream.dev/disk-limit';
/** "1" where the engine enforces the limit on the container's layer (StorageOpt size). */
export const DiskQuotaLabel = 'sandstream.dev/disk-quota';

/**
 * Whether the engine can cap a container's writable layer (`--storage-opt size=`). overlay2 can
 * only on xfs mounted with pquota, which `docker info` does not tell: a probe container (created,
 * never started) settles it. overlay2 on anything else (ext4 here) cannot, so no probe.
 */
export async function detectStorageQuota(docker: Dockerode, probeImage: string): Promise<boolean> {
  const info = (await docker.info()) as { Driver?: string; DriverStatus?: [string, string][] };
  const backing = info.DriverStatus?.find(([k]) => k === 'Backing Filesystem')?.[1];
  if (info.Driver === 'overlay2' && backing !== 'xfs') return false;
  try {
    const probe = await docker.createContainer({
      Image: probeImage,
      Cmd: ['true'],
      Labels: { 'sandstream.dev/role': 'quota-probe' },
      HostConfig: { StorageOpt: { size: '64M' } },
    });
    await probe.remove({ force: true }).catch(() => {});
    return true;
  } catch {
    return false;
  }
}

interface Watched {
  limitBytes: number;
  quota: boolean;
  upperDir: string | undefined;
  workDir: string | undefined;
  /** /proc/<pid>/root/tmp when /tmp is a tmpfs (memory, but the sandbox's to fill all the same). */
  tmpfsDir: string | undefined;
}

/**
 * Measures a sandbox's disk from the engine's own directories, which the backend's owner reads
 * on the engine's host: the work volume's mountpoint and the container's overlay upper directory
 * (its writable layer). Where those are not readable (a remote engine), the layer falls back to
 * `SizeRw` from an inspect with sizes, which costs the engine a walk of the layer itself.
 */
export class DockerDiskMeter {
  /** Paths per container id: they do not change while the container lives. */
  private readonly paths = new Map<string, Watched>();

  constructor(private readonly docker: Dockerode) {}

  async usage(containerId: string): Promise<SandboxDiskUsage | undefined> {
    const watched = await this.watched(containerId);
    if (!watched) return undefined;
    const parts: Record<string, number> = {};
    parts.work = watched.workDir ? await allocatedBytes(watched.workDir) : 0;
    if (watched.upperDir) parts.layer = await allocatedBytes(watched.upperDir);
    else {
      try {
        // The engine's `size` query (missing from dockerode's types).
        const options = { size: true } as Dockerode.ContainerInspectOptions;
        const info = (await this.docker.getContainer(containerId).inspect(options)) as { SizeRw?: number };
        parts.layer = info.SizeRw ?? 0;
      } catch (err) {
        if (isNotFound(err)) return this.forget(containerId);
        throw err;
      }
    }
    if (watched.tmpfsDir) parts.tmpfs = await allocatedBytes(watched.tmpfsDir);
    const usedBytes = Object.values(parts).reduce((a, b) => a + b, 0);
    return { usedBytes, limitBytes: watched.limitBytes, enforcement: 'watch', quota: watched.quota, parts };
  }

  forget(containerId: string): undefined {
    this.paths.delete(containerId);
    return undefined;
  }

  private async watched(containerId: string): Promise<Watched | undefined> {
    const known = this.paths.get(containerId);
    if (known) return known;
    let info: Dockerode.ContainerInspectInfo;
    try {
      info = await this.docker.getContainer(containerId).inspect();
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    const limit = Number(info.Config.Labels?.[DiskLimitLabel]);
    // A sandbox made before disk limits existed has no label: nothing to judge it by.
    if (!Number.isFinite(limit) || limit <= 0 || !info.State.Running) return undefined;
    const readable = async (path: string | undefined) =>
      path &&
      (await access(path).then(
        () => true,
        () => false,
      ))
        ? path
        : undefined;
    const work = info.Mounts.find((m) => m.Destination === info.Config.WorkingDir);
    const tmpfs = info.HostConfig.Tmpfs?.['/tmp'] !== undefined && info.State.Pid > 0;
    const watched: Watched = {
      limitBytes: limit,
      quota: info.Config.Labels?.[DiskQuotaLabel] === '1',
      upperDir: await readable((info.GraphDriver?.Data as { UpperDir?: string } | undefined)?.UpperDir),
      workDir: await readable(work?.Source),
      tmpfsDir: tmpfs ? await readable(join('/proc', String(info.State.Pid), 'root', 'tmp')) : undefined,
    };
    this.paths.set(containerId, watched);
    return watched;
  }
}
