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
 * On the toolchain: its read-write volumes with a size limit, as JSON `[[volume, source, bytes]]`
 * (the `local` driver has no size option: they are watched like the disk budget).
 */
export const VolumeLimitsLabel = 'sandstream.dev/volume-limits';

/** The label's value for a spec's volumes; undefined when none is limited. */
export function volumeLimitsLabel(
  volumes: readonly {
    volume: string;
    source: string;
    readOnly: boolean;
    sizeLimitBytes?: number | undefined;
  }[],
): string | undefined {
  const limited = volumes.filter((v) => !v.readOnly && v.sizeLimitBytes !== undefined);
  return limited.length
    ? JSON.stringify(limited.map((v) => [v.volume, v.source, v.sizeLimitBytes]))
    : undefined;
}

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

interface EngineDiskUsage {
  Volumes?: { Name: string; UsageData?: { Size?: number } | null }[] | null;
  Containers?: { Id: string; SizeRw?: number }[] | null;
}

interface Watched {
  limitBytes: number;
  workVolume: string | undefined;
  quota: boolean;
  upperDir: string | undefined;
  workDir: string | undefined;
  /** /proc/<pid>/root/tmp when /tmp is a tmpfs (memory, but the sandbox's to fill all the same). */
  tmpfsDir: string | undefined;
  /** Limited read-write volumes: the mountpoint when this host reads it, else the engine's report. */
  volumes: { volume: string; source: string; dir: string | undefined; limitBytes: number }[];
}

/**
 * Measures a sandbox's disk from the engine's own directories, which the backend's owner reads
 * on the engine's host: the work volume's mountpoint and the container's overlay upper directory
 * (its writable layer). Where those are not readable (pod-lifecycle in a container without
 * /var/lib/docker, a remote engine), the engine's `/system/df` report answers instead: volume
 * sizes and each container's `SizeRw`, which costs the engine a walk of them all.
 */
export class DockerDiskMeter {
  /** Paths per container id: they do not change while the container lives. */
  private readonly paths = new Map<string, Watched>();
  private df: { at: number; report: Promise<EngineDiskUsage> } | undefined;

  constructor(
    private readonly docker: Dockerode,
    /** false: always the engine's report, as where the host's paths are out of reach. */
    private readonly readHostPaths = true,
  ) {}

  async usage(containerId: string): Promise<SandboxDiskUsage | undefined> {
    const watched = await this.watched(containerId);
    if (!watched) return undefined;
    const parts: Record<string, number> = {};
    if (watched.workDir) parts.work = await allocatedBytes(watched.workDir);
    if (watched.upperDir) parts.layer = await allocatedBytes(watched.upperDir);
    if (!watched.workDir || !watched.upperDir) {
      // Not on this host's filesystem (pod-lifecycle in a container, a remote engine): the
      // engine's own disk-usage report, one call for every sandbox of the round.
      const df = await this.engineDiskUsage();
      if (!watched.workDir) {
        parts.work = df.Volumes?.find((v) => v.Name === watched.workVolume)?.UsageData?.Size ?? 0;
      }
      if (!watched.upperDir) {
        const container = df.Containers?.find((c) => c.Id === containerId);
        if (!container) return this.forget(containerId);
        parts.layer = container.SizeRw ?? 0;
      }
    }
    if (watched.tmpfsDir) parts.tmpfs = await allocatedBytes(watched.tmpfsDir);
    const usedBytes = Object.values(parts).reduce((a, b) => a + b, 0);
    const volumes = await Promise.all(
      watched.volumes.map(async (v) => ({
        volume: v.volume,
        usedBytes: v.dir
          ? await allocatedBytes(v.dir)
          : ((await this.engineDiskUsage()).Volumes?.find((d) => d.Name === v.source)?.UsageData?.Size ?? 0),
        limitBytes: v.limitBytes,
      })),
    );
    return {
      usedBytes,
      limitBytes: watched.limitBytes,
      enforcement: 'watch',
      quota: watched.quota,
      parts,
      ...(volumes.length ? { volumes } : {}),
    };
  }

  /** GET /system/df, shared by the measures of one round (it walks every volume and layer). */
  private engineDiskUsage(): Promise<EngineDiskUsage> {
    if (!this.df || Date.now() - this.df.at > 1000) {
      this.df = { at: Date.now(), report: this.docker.df() as Promise<EngineDiskUsage> };
      this.df.report.catch(() => {
        this.df = undefined;
      });
    }
    return this.df.report;
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
      this.readHostPaths &&
      path &&
      (await access(path).then(
        () => true,
        () => false,
      ))
        ? path
        : undefined;
    const work = info.Mounts.find((m) => m.Destination === info.Config.WorkingDir);
    const limited = parseVolumeLimits(info.Config.Labels?.[VolumeLimitsLabel]);
    const volumes: Watched['volumes'] = [];
    for (const [volume, source, limitBytes] of limited) {
      const mount = info.Mounts.find((m) => m.Name === source);
      volumes.push({ volume, source, dir: await readable(mount?.Source), limitBytes });
    }
    const tmpfs = info.HostConfig.Tmpfs?.['/tmp'] !== undefined && info.State.Pid > 0;
    const watched: Watched = {
      limitBytes: limit,
      quota: info.Config.Labels?.[DiskQuotaLabel] === '1',
      workVolume: work?.Name,
      upperDir: await readable((info.GraphDriver?.Data as { UpperDir?: string } | undefined)?.UpperDir),
      workDir: await readable(work?.Source),
      tmpfsDir: tmpfs ? await readable(join('/proc', String(info.State.Pid), 'root', 'tmp')) : undefined,
      volumes,
    };
    this.paths.set(containerId, watched);
    return watched;
  }
}

function parseVolumeLimits(label: string | undefined): [string, string, number][] {
  if (!label) return [];
  try {
    const parsed = JSON.parse(label) as unknown;
    return Array.isArray(parsed)
      ? parsed.filter(
          (e): e is [string, string, number] =>
            Array.isArray(e) &&
            typeof e[0] === 'string' &&
            typeof e[1] === 'string' &&
            typeof e[2] === 'number',
        )
      : [];
  } catch {
    // A label edited by hand: nothing to watch by.
    return [];
  }
}
