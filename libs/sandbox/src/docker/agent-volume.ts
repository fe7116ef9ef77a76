import type Dockerode from 'dockerode';
import { SandboxStartError } from '../backend.js';
import { ignoreGone, isConflict, isNotFound } from './docker-errors.js';
import { containerLogTail } from './docker-logs.js';

/**
 * How /shared (the agent binary and its loader and libraries) is provided. `cached` is the
 * default: the per-job carrier run alone made a cold start about 3x `docker run --rm image true`,
 * against a goal of 1.5x (docs/benchmarks.md); the cached volume is read-only in every sandbox,
 * so sharing it between jobs shares nothing a sandbox can change.
 *
 * - `per-job`: a fresh volume per job, filled by running the carrier image to completion, as a
 *   Kubernetes init container would. Nothing is shared between jobs; costs one container run.
 * - `cached`: one read-only volume per carrier image id, filled once by the same carrier run and
 *   reused by every job until the carrier image changes. Saves that container run (about half
 *   of a cold start here); the volume is only ever mounted read-only into sandboxes.
 */
export type AgentVolumeMode = 'per-job' | 'cached';

export interface FillOptions {
  docker: Dockerode;
  carrierImage: string;
  volume: string;
  /** Name for the carrier container (removed once it has exited 0). */
  containerName: string;
  labels: Record<string, string>;
}

export async function carrierImageId(docker: Dockerode, carrierImage: string): Promise<string> {
  try {
    return (await docker.getImage(carrierImage).inspect()).Id;
  } catch (err) {
    if (isNotFound(err)) {
      throw new SandboxStartError(
        'image_not_found',
        `agent carrier image "${carrierImage}" is not on the Docker engine; build it (scripts/images/build-all.sh) or set the backend's carrierImage`,
      );
    }
    throw err;
  }
}

/** Creates `volume` and runs the carrier into it; throws SandboxStartError when the carrier fails. */
export async function fillAgentVolume(options: FillOptions): Promise<void> {
  const { docker } = options;
  await docker.createVolume({ Name: options.volume, Labels: options.labels });
  // A leftover carrier of an earlier attempt with the same name would make create fail with 409.
  await ignoreGone(() => docker.getContainer(options.containerName).remove({ force: true }));
  const carrier = await docker.createContainer({
    name: options.containerName,
    Image: options.carrierImage,
    Labels: options.labels,
    HostConfig: {
      Mounts: [{ Type: 'volume', Source: options.volume, Target: '/shared' }],
      NetworkMode: 'none',
      SecurityOpt: ['no-new-privileges'],
      CapDrop: ['ALL'],
    },
  });
  await carrier.start();
  const { StatusCode } = (await carrier.wait()) as { StatusCode: number };
  if (StatusCode !== 0) {
    const lines = await containerLogTail(carrier);
    await ignoreGone(() => carrier.remove({ force: true }));
    throw new SandboxStartError(
      'backend_error',
      `agent carrier ${options.carrierImage} exited with code ${StatusCode} while filling ${options.volume}: ${lines.join(' | ') || 'no output'}`,
    );
  }
  await ignoreGone(() => carrier.remove({ force: true }));
}

/**
 * The cached volume for a carrier image id, filled at most once per process at a time. A marker
 * volume created after a successful fill says "complete" to every other process, so a half-filled
 * volume (a filler that died) is never mounted: it is filled again instead. Two processes filling
 * the same volume at once is harmless: the carrier writes every file to a temporary name and
 * renames it into place (agent/src/inject.ts).
 */
export class CachedAgentVolumes {
  private readonly inFlight = new Map<string, Promise<string>>();
  /** Volumes this process has seen complete: the marker is not looked up again for them. */
  private readonly complete = new Set<string>();

  constructor(
    private readonly docker: Dockerode,
    private readonly labels: Record<string, string>,
  ) {}

  volumeName(imageId: string): string {
    return `sandstream-agent-${imageId.replace(/^sha256:/, '').slice(0, 16)}`;
  }

  async volumeFor(carrierImage: string, imageId: string): Promise<string> {
    const short = imageId.replace(/^sha256:/, '').slice(0, 16);
    const existing = this.inFlight.get(short);
    if (existing) return existing;
    const pending = this.ensure(carrierImage, short).finally(() => this.inFlight.delete(short));
    this.inFlight.set(short, pending);
    return pending;
  }

  private async ensure(carrierImage: string, short: string): Promise<string> {
    const volume = this.volumeName(short);
    if (this.complete.has(volume)) return volume;
    const marker = `${volume}-complete`;
    try {
      await this.docker.getVolume(marker).inspect();
      this.complete.add(volume);
      return volume;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    await fillAgentVolume({
      docker: this.docker,
      carrierImage,
      volume,
      containerName: `${volume}-filler-${process.pid}`,
      labels: this.labels,
    });
    try {
      await this.docker.createVolume({ Name: marker, Labels: this.labels });
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    this.complete.add(volume);
    return volume;
  }
}
