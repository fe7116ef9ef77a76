import type { VolumeStore } from '@sandstream/bus';
import type { Sandbox } from './sandbox.js';
import type { Sandboxes } from './sandboxes.js';
import type { VolumeTransport } from './volumes.js';

/** Where the helper sandbox mounts the volume it reads or writes. */
const HELPER_MOUNT = '/volume';
/** A helper lives for one file operation; this bounds one left behind by a client that died. */
const HELPER_IDLE_SECONDS = 60;

export interface RedisVolumeTransportOptions {
  store: VolumeStore;
  /** The client's sandboxes: the helper of a file operation is one. */
  sandboxes: Sandboxes;
  tenant: string;
  /** The helper sandbox's image (any image: the agent does the file work). */
  helperImage: string;
}

/**
 * Volumes over Redis: records and holds through VolumeStore (its scripts check quota and
 * exclusivity atomically), files through a helper sandbox per call.
 */
export class RedisVolumeTransport implements VolumeTransport {
  constructor(private readonly options: RedisVolumeTransportOptions) {}

  create(request: Parameters<VolumeTransport['create']>[0]) {
    return this.options.store
      .create(this.options.tenant, request)
      .then(({ volume, created }) => ({ volume: { ...volume, holders: [] }, created }));
  }

  list() {
    return this.options.store.list(this.options.tenant);
  }

  async get(name: string) {
    return (await this.list()).find((v) => v.name === name) ?? null;
  }

  delete(name: string) {
    return this.options.store.delete(this.options.tenant, name);
  }

  readFile(name: string, path: string) {
    return this.withHelper(name, true, (box) => box.files.read(`${HELPER_MOUNT}/${path}`));
  }

  writeFile(name: string, path: string, content: string | Uint8Array, mode?: number) {
    return this.withHelper(name, false, (box) =>
      box.files.write(`${HELPER_MOUNT}/${path}`, content, mode === undefined ? {} : { mode }),
    );
  }

  listFiles(name: string, path: string, options: { maxDepth: number; maxEntries: number }) {
    // Entries are relative to the listed directory: nothing of the helper's mount shows.
    return this.withHelper(name, true, (box) => box.files.list(`${HELPER_MOUNT}/${path}`, options));
  }

  forTenant(tenant: string): VolumeTransport {
    return new RedisVolumeTransport({ ...this.options, tenant });
  }

  /** One file operation in a helper sandbox that mounts the volume, closed whatever happens. */
  private async withHelper<T>(
    name: string,
    readOnly: boolean,
    work: (box: Sandbox) => Promise<T>,
  ): Promise<T> {
    const box = await this.options.sandboxes.create({
      tenant: this.options.tenant,
      image: this.options.helperImage,
      volumes: [{ name, mountPath: HELPER_MOUNT, readOnly }],
      idleTimeoutSeconds: HELPER_IDLE_SECONDS,
      timeoutSeconds: 600,
      labels: { 'sandstream.dev/volume-files': name },
    });
    try {
      return await work(box);
    } finally {
      await box.close().catch(() => undefined);
      // The file operation is over: its hold goes now, not when the helper's teardown ends (a
      // close that outlasts its wait on a loaded node would leave the volume busy for a delete
      // or a writer that comes right after this call).
      await this.options.store.release(box.id).catch(() => undefined);
    }
  }
}
