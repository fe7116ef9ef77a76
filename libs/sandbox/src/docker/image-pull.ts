import type Dockerode from 'dockerode';
import { type CreateProgress, SandboxStartError } from '../backend.js';
import { dockerStatus, isNotFound } from './docker-errors.js';
import { type RegistryAuth, registryHostOf } from './registry-credentials.js';

/** One line of the engine's pull stream (POST /images/create). */
interface PullEvent {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

/** Statuses after which a layer needs nothing more from the registry. */
const LAYER_DONE = new Set(['Pull complete', 'Already exists']);

/**
 * Sums the engine's per-layer pull events into one progress: layers seen and finished, bytes
 * downloaded of the layers whose size the engine announced. A layer's download bytes stay at its
 * total once it moved on to extracting (the engine then reports extraction bytes under the same
 * id, which are not download progress).
 */
export class PullProgressTally {
  private readonly layers = new Map<string, { current: number; total: number; done: boolean }>();

  constructor(private readonly image: string) {}

  add(event: PullEvent): void {
    const { id, status } = event;
    // Lines without a layer id are about the whole pull ("Pulling from …", "Digest: …").
    if (!id || !status || id === this.tag()) return;
    const layer = this.layers.get(id) ?? { current: 0, total: 0, done: false };
    if (status === 'Downloading') {
      layer.current = event.progressDetail?.current ?? layer.current;
      layer.total = event.progressDetail?.total ?? layer.total;
    } else if (status === 'Download complete' || status === 'Extracting' || status === 'Verifying Checksum') {
      layer.current = layer.total;
    }
    if (LAYER_DONE.has(status)) {
      layer.done = true;
      layer.current = layer.total;
    }
    this.layers.set(id, layer);
  }

  snapshot(done: boolean): CreateProgress {
    let downloadedBytes = 0;
    let totalBytes = 0;
    let layersDone = 0;
    for (const layer of this.layers.values()) {
      downloadedBytes += layer.current;
      totalBytes += layer.total;
      if (layer.done) layersDone++;
    }
    return {
      phase: 'image-pull',
      image: this.image,
      layers: this.layers.size,
      layersDone: done ? this.layers.size : layersDone,
      downloadedBytes,
      totalBytes,
      done,
    };
  }

  /** The engine also reports the tag itself ("<tag>: Pulling from …") under an id. */
  private tag(): string {
    const colon = this.image.lastIndexOf(':');
    return colon > this.image.lastIndexOf('/') ? this.image.slice(colon + 1) : 'latest';
  }
}

/** The engine's words without dockerode's "(HTTP code 500) server error - " prefix. */
function engineMessage(err: unknown): string {
  const message = (err as Error).message ?? String(err);
  return message.replace(/^\(HTTP code \d+\)[^-]*- /, '').trim();
}

/**
 * What a failed pull means, in words an operator can act on. The engine answers 404 for a name or
 * tag the registry does not have; for a registry that wants credentials it answers 500 with the
 * registry's words, which say whether none were sent or the ones sent were refused.
 */
export function pullFailure(image: string, err: unknown, auth: RegistryAuth | undefined): SandboxStartError {
  const said = engineMessage(err);
  const registry = registryHostOf(image) ?? "the engine's default registry";
  if (isNotFound(err) || /manifest unknown|name unknown|not found/i.test(said)) {
    return new SandboxStartError(
      'image_not_found',
      `image "${image}" does not exist in ${registry} (no such repository or tag): ${said}`,
    );
  }
  if (/no basic auth credentials|authentication required|unauthorized|denied|forbidden/i.test(said)) {
    const why = auth
      ? `refused the credentials pod-lifecycle's registry credentials file has for ${auth.serveraddress}`
      : `asks for credentials and pod-lifecycle's registry credentials file (SANDSTREAM_DOCKER_CONFIG_FILE) has none for ${registry}`;
    return new SandboxStartError(
      'image_pull',
      `image "${image}" cannot be pulled: ${registry} ${why} (${said})`,
    );
  }
  return new SandboxStartError(
    'image_pull',
    `image "${image}" cannot be pulled from ${registry}${dockerStatus(err) ? '' : ' (engine)'}: ${said}`,
  );
}

/** How long a pull may take in all, and without a progress line, before the create gives up. */
export interface PullLimits {
  /** SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS: the whole pull, from asking the engine to done. */
  timeoutMs: number;
  /** SANDSTREAM_DOCKER_PULL_STALL_SECONDS: the longest wait for the next line of the engine's stream. */
  stallMs: number;
}

/** Defaults: a few minutes for a large image, and a stall limit well above a slow layer's gaps. */
export const DEFAULT_PULL_LIMITS: PullLimits = { timeoutMs: 600_000, stallMs: 120_000 };

/**
 * Pulls `image` onto the engine, reporting progress as the layers come in, and resolves once it
 * is there. Rejects with a SandboxStartError (pullFailure) when the engine refuses the pull or the
 * stream ends with an error line (a layer that failed half-way), and with a `image_pull` error
 * naming the setting when the pull outlives `limits` (a registry that accepts and never answers
 * would otherwise hold the create forever). The engine's request is aborted then.
 */
export function pullImage(
  docker: Dockerode,
  image: string,
  options: {
    auth?: RegistryAuth | undefined;
    onProgress?: ((progress: CreateProgress) => void) | undefined;
    limits?: PullLimits | undefined;
  },
): Promise<void> {
  const limits = options.limits ?? DEFAULT_PULL_LIMITS;
  const tally = new PullProgressTally(image);
  const report = (done: boolean) => {
    try {
      options.onProgress?.(tally.snapshot(done));
    } catch {
      // A progress listener's trouble must not fail the create.
    }
  };
  const abort = new AbortController();
  let overall: NodeJS.Timeout | undefined;
  let stall: NodeJS.Timeout | undefined;
  let settled = false;
  return new Promise<void>((resolve, reject) => {
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(overall);
      clearTimeout(stall);
      if (err) reject(err);
      else resolve();
    };
    const giveUp = (message: string) => {
      finish(new SandboxStartError('image_pull', message));
      abort.abort();
    };
    const registry = registryHostOf(image) ?? "the engine's default registry";
    overall = setTimeout(
      () =>
        giveUp(
          `image "${image}" was not pulled from ${registry} within ${limits.timeoutMs / 1000} s (SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS)`,
        ),
      limits.timeoutMs,
    );
    const armStall = () => {
      clearTimeout(stall);
      stall = setTimeout(
        () =>
          giveUp(
            `pulling image "${image}" from ${registry} made no progress for ${limits.stallMs / 1000} s (SANDSTREAM_DOCKER_PULL_STALL_SECONDS)`,
          ),
        limits.stallMs,
      );
    };
    armStall();
    const pullOptions = {
      ...(options.auth ? { authconfig: options.auth } : {}),
      abortSignal: abort.signal,
    };
    docker.pull(image, pullOptions, (err: unknown, stream: NodeJS.ReadableStream | undefined) => {
      if (settled) {
        (stream as { destroy?: () => void } | undefined)?.destroy?.();
        return;
      }
      if (err || !stream) {
        finish(pullFailure(image, err ?? new Error('the engine returned no pull stream'), options.auth));
        return;
      }
      armStall();
      report(false);
      docker.modem.followProgress(
        stream,
        (finishErr: Error | null) => {
          if (finishErr) {
            finish(pullFailure(image, finishErr, options.auth));
            return;
          }
          report(true);
          finish();
        },
        (event: PullEvent) => {
          armStall();
          tally.add(event);
          report(false);
        },
      );
    });
  });
}
