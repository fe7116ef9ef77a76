import { posix } from 'node:path';
import {
  type VolumeCreate,
  type VolumeCreateInput,
  VolumeCreateSchema,
  type VolumeInfo,
  VolumeQuotaError,
} from '@sandstream/bus';
import type { FileEntry } from '@sandstream/wire';
import { parseOptions, SandstreamOptionsError } from './client-options.js';
import { SandboxLimitError } from './sandbox-errors.js';
import {
  type ListFilesOptions,
  ListFilesOptionsSchema,
  type WriteFileOptions,
  WriteFileOptionsSchema,
} from './sandbox-options.js';

/** What a transport does for `client.volumes` (Redis: redis-volume-transport.ts; HTTP: the API). */
export interface VolumeTransport {
  create(request: VolumeCreate): Promise<{ volume: VolumeInfo; created: boolean }>;
  list(): Promise<VolumeInfo[]>;
  get(name: string): Promise<VolumeInfo | null>;
  delete(name: string): Promise<void>;
  readFile(name: string, path: string): Promise<string>;
  writeFile(name: string, path: string, content: string | Uint8Array, mode?: number): Promise<number>;
  listFiles(
    name: string,
    path: string,
    options: { maxDepth: number; maxEntries: number },
  ): Promise<{ entries: FileEntry[]; truncated: boolean }>;
  /** The same, for one tenant's volumes (Redis; over HTTP the API key decides the tenant). */
  forTenant(tenant: string): VolumeTransport;
}

/**
 * A tenant's volumes: named storage that outlives sandboxes (docs/volumes.md). Mounted with
 * `volumes: [{ name, mountPath, readOnly? }]` on a sandbox or job spec; one writer at a time.
 */
export class Volumes {
  constructor(private readonly transport: VolumeTransport) {}

  /**
   * Creates a volume (idempotent by name: the existing one is returned). Over the tenant's
   * quota: SandboxLimitError naming `maxCount` or `maxBytes`.
   */
  async create(input: VolumeCreateInput): Promise<VolumeInfo> {
    const request = parseOptions(VolumeCreateSchema, input, 'volume');
    try {
      return (await this.transport.create(request)).volume;
    } catch (err) {
      if (err instanceof VolumeQuotaError) throw new SandboxLimitError(err.message);
      throw err;
    }
  }

  list(): Promise<VolumeInfo[]> {
    return this.transport.list();
  }

  get(name: string): Promise<VolumeInfo | null> {
    return this.transport.get(name);
  }

  /** Refused (VolumeInUseError, naming the sandbox) while a sandbox mounts it. */
  delete(name: string): Promise<void> {
    return this.transport.delete(name);
  }

  /** Files on the volume without a sandbox of yours: read, write, list (paths inside the volume). */
  files(name: string): VolumeFiles {
    return new VolumeFiles(name, this.transport);
  }

  /** The volumes of one tenant (over Redis; the default is `default`). */
  forTenant(tenant: string): Volumes {
    return new Volumes(this.transport.forTenant(tenant));
  }
}

/**
 * A volume's files. Each call runs in a short-lived helper sandbox of the tenant that mounts the
 * volume (read-only for a read or list, read-write for a write) and is closed after: the backend
 * lives in the services, never in the SDK or the API, so this works on every backend and both
 * transports, with the volume's one-writer rule and the agent's file limits (docs/volumes.md).
 */
export class VolumeFiles {
  constructor(
    readonly volume: string,
    private readonly transport: VolumeTransport,
  ) {}

  read(path: string): Promise<string> {
    return this.transport.readFile(this.volume, insideVolume(path));
  }

  write(path: string, content: string | Uint8Array, writeOptions: WriteFileOptions = {}): Promise<number> {
    const options = parseOptions(WriteFileOptionsSchema, writeOptions, 'write options');
    return this.transport.writeFile(this.volume, insideVolume(path), content, options.mode);
  }

  list(
    path = '.',
    listOptions: ListFilesOptions = {},
  ): Promise<{ entries: FileEntry[]; truncated: boolean }> {
    const options = parseOptions(ListFilesOptionsSchema, listOptions, 'list options');
    return this.transport.listFiles(this.volume, insideVolume(path), {
      maxDepth: options.maxDepth ?? 1,
      maxEntries: options.maxEntries ?? 1000,
    });
  }
}

/** A path inside the volume, relative to its root (`a/b`, `/a/b` and `./a/b` are one); `..` out refused. */
export function insideVolume(path: string): string {
  if (path.includes('\0')) throw new SandstreamOptionsError('path: must not contain NUL');
  const normal = posix.normalize(`/${path}`);
  if (normal.split('/').includes('..'))
    throw new SandstreamOptionsError(`path: ${path} leads out of the volume`);
  return normal === '/' ? '.' : normal.slice(1);
}
