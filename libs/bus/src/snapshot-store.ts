import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { type NatsConnection, type ObjectStore, StorageType } from 'nats';

/** A stored snapshot's bytes do not match its record: the message names how. */
export class SnapshotIntegrityError extends Error {
  override readonly name = 'SnapshotIntegrityError';
}

/** What put() stored: the record keeps both, and every restore checks them first. */
export interface StoredSnapshot {
  sizeBytes: number;
  sha256: string;
}

/** Bucket names allow letters, digits, `-` and `_`: a namespace's dots become `_`. */
export function snapshotBucketName(namespace: string): string {
  return `sandstream_snapshots_${namespace.replace(/[^A-Za-z0-9_-]/g, '_')}`;
}

/** Bytes between two flushes of the connection while uploading: what an upload holds in memory at most. */
const FLUSH_EVERY_BYTES = 8 * 1024 * 1024;
const CHUNK_BYTES = 256 * 1024;

/**
 * Snapshot bytes in NATS JetStream's object store (one bucket per namespace, file storage,
 * replicated as the operator's NATS cluster replicates), off the node, so any node restores
 * them. Streamed both ways: an upload flushes the connection every 8 MB, so no more than that
 * waits in this process. The record (SnapshotRecords) holds the size and SHA-256 that `open`
 * checks before it hands out a byte.
 */
export class SnapshotStore {
  private bucket: Promise<ObjectStore> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly namespace: string,
    private readonly options: { replicas?: number } = {},
  ) {}

  private store(): Promise<ObjectStore> {
    this.bucket ??= this.nc
      .jetstream()
      .views.os(snapshotBucketName(this.namespace), {
        storage: StorageType.File,
        ...(this.options.replicas ? { replicas: this.options.replicas } : {}),
      })
      .catch((err: Error) => {
        this.bucket = undefined;
        throw err;
      });
    return this.bucket;
  }

  /** Stores the stream under the snapshot id; a failed upload leaves nothing under it. */
  async put(snapshotId: string, source: Readable): Promise<StoredSnapshot> {
    const os = await this.store();
    const hash = createHash('sha256');
    let sizeBytes = 0;
    let sinceFlush = 0;
    const iterator = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const nc = this.nc;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sinceFlush >= FLUSH_EVERY_BYTES) {
          // The object store publishes chunks without waiting: a flush waits until the server has them.
          await nc.flush();
          sinceFlush = 0;
        }
        const next = await iterator.next();
        if (next.done) {
          controller.close();
          return;
        }
        const chunk = next.value;
        hash.update(chunk);
        sizeBytes += chunk.length;
        sinceFlush += chunk.length;
        controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
      },
      async cancel() {
        await iterator.return?.();
      },
    });
    try {
      await os.put({ name: snapshotId, options: { max_chunk_size: CHUNK_BYTES } }, stream);
    } catch (err) {
      await this.delete(snapshotId).catch(() => {});
      source.destroy();
      throw err;
    }
    return { sizeBytes, sha256: hash.digest('hex') };
  }

  /**
   * The stored bytes, after a first read found them whole (size and SHA-256 as recorded): a
   * damaged or truncated object is refused before a restore changes any file.
   */
  async open(snapshotId: string, expected: StoredSnapshot): Promise<Readable> {
    await this.verify(snapshotId, expected);
    return this.read(snapshotId);
  }

  async verify(snapshotId: string, expected: StoredSnapshot): Promise<void> {
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of await this.read(snapshotId)) {
      hash.update(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
    if (size !== expected.sizeBytes) {
      throw new SnapshotIntegrityError(
        `snapshot ${snapshotId} is ${size < expected.sizeBytes ? 'truncated' : 'too long'} in storage: ${size} bytes stored, ${expected.sizeBytes} recorded`,
      );
    }
    const digest = hash.digest('hex');
    if (digest !== expected.sha256) {
      throw new SnapshotIntegrityError(
        `snapshot ${snapshotId} is damaged in storage: its bytes hash to SHA-256 ${digest}, ${expected.sha256} recorded`,
      );
    }
  }

  private async read(snapshotId: string): Promise<Readable> {
    const os = await this.store();
    const result = await os.get(snapshotId);
    if (!result)
      throw new SnapshotIntegrityError(
        `snapshot ${snapshotId} has no stored bytes (deleted, or its upload never finished)`,
      );
    const web = Readable.fromWeb(result.data as import('node:stream/web').ReadableStream<Uint8Array>);
    // The object store's own digest check ends the read with an error on a mismatch.
    result.error.then((err) => {
      if (err)
        web.destroy(
          new SnapshotIntegrityError(`snapshot ${snapshotId} failed its object-store check: ${err.message}`),
        );
    });
    return web.map((chunk: Uint8Array) => Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
  }

  /** Idempotent. */
  async delete(snapshotId: string): Promise<void> {
    const os = await this.store();
    const info = await os.info(snapshotId).catch(() => null);
    if (info) await os.delete(snapshotId);
  }

  /**
   * Chunk groups (nuids) the bucket's stream holds that no stored object names: what an upload
   * killed mid-way leaves (its object's metadata is written last). Includes uploads under way.
   */
  async unreferencedChunks(): Promise<string[]> {
    const os = await this.store();
    const referenced = new Set((await os.list()).map((i) => i.nuid));
    const bucket = snapshotBucketName(this.namespace);
    const jsm = await this.nc.jetstreamManager();
    const info = await jsm.streams.info(`OBJ_${bucket}`, { subjects_filter: `$O.${bucket}.C.>` });
    const prefix = `$O.${bucket}.C.`;
    return Object.keys(info.state.subjects ?? {})
      .map((subject) => subject.slice(prefix.length))
      .filter((nuid) => !referenced.has(nuid));
  }

  /** Deletes one unreferenced chunk group (unreferencedChunks). */
  async purgeChunks(nuid: string): Promise<void> {
    const bucket = snapshotBucketName(this.namespace);
    const jsm = await this.nc.jetstreamManager();
    await jsm.streams.purge(`OBJ_${bucket}`, { filter: `$O.${bucket}.C.${nuid}` });
  }

  /** Names of the stored objects (the reaper compares them with the records). */
  async names(): Promise<string[]> {
    const os = await this.store();
    return (await os.list()).filter((i) => !i.deleted).map((i) => i.name);
  }
}
