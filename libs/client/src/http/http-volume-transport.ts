import type { VolumeCreate, VolumeInfo } from '@sandstream/bus';
import type { FileEntry } from '@sandstream/wire';
import type { VolumeTransport } from '../volumes.js';
import type { HttpApi } from './http-api.js';

/** Volumes over the HTTP API (`/v1/volumes…`); the API key's tenant is the volumes' tenant. */
export class HttpVolumeTransport implements VolumeTransport {
  constructor(private readonly api: HttpApi) {}

  private path(name?: string, tail = ''): string {
    return name === undefined ? '/v1/volumes' : `/v1/volumes/${encodeURIComponent(name)}${tail}`;
  }

  async create(request: VolumeCreate): Promise<{ volume: VolumeInfo; created: boolean }> {
    const response = await this.api.request(this.path(), { method: 'POST', body: request });
    return { volume: (await response.json()) as VolumeInfo, created: response.status === 201 };
  }

  async list(): Promise<VolumeInfo[]> {
    return (await this.api.json<{ volumes: VolumeInfo[] }>(this.path())).volumes;
  }

  get(name: string): Promise<VolumeInfo | null> {
    return this.api.jsonOrNull<VolumeInfo>(this.path(name));
  }

  async delete(name: string): Promise<void> {
    const response = await this.api.request(this.path(name), { method: 'DELETE' });
    await response.body?.cancel();
  }

  async readFile(name: string, path: string): Promise<string> {
    return (await this.api.request(this.path(name, '/files'), { query: { path } })).text();
  }

  async writeFile(name: string, path: string, content: string | Uint8Array, mode?: number): Promise<number> {
    const written = await this.api.json<{ bytesWritten: number }>(this.path(name, '/files'), {
      method: 'PUT',
      query: { path, mode: mode === undefined ? undefined : mode.toString(8).padStart(3, '0') },
      body: content,
      contentType: typeof content === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream',
    });
    return written.bytesWritten;
  }

  listFiles(
    name: string,
    path: string,
    options: { maxDepth: number; maxEntries: number },
  ): Promise<{ entries: FileEntry[]; truncated: boolean }> {
    return this.api.json(this.path(name, '/files'), { query: { path, list: true, ...options } });
  }

  forTenant(): VolumeTransport {
    return this;
  }
}
