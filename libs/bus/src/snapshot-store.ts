import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { NatsConnection, ObjectStore, StorageType } from 'nats';
import { putObjectChunks, readObjectChunks } from './object-chunks.js';

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

/**
 * Snapshot bytes in NATS JetStream's object store (one bucket per namespace, file storage,
 * replicated as the operator's NATS cluster replicates), off the node, so any node restores
 * them. Streamed both ways (object-chunks.ts): an upload has at most 8 chunks of 1 MB waiting
 * for the server's acknowledgement, so no more than that waits in this process. The record (SnapshotRecords) holds the size and SHA-256 that `open`
 * checks before it hands out a byte.
 */
/** A chunk group no stored object names (SnapshotStore.unreferencedChunks). */
export interface UnreferencedChunkGroup {
  nuid: string;
  /** Chunks it holds now: an upload under way adds to it. */
  chunks: number;
}

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
        // StorageType.File's value: a type-only import keeps nats unloaded where this is never called.
        storage: 'file' as StorageType.File,
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
    await this.store();
    const bucket = snapshotBucketName(this.namespace);
    try {
      const put = await putObjectChunks(this.nc.jetstream(), bucket, snapshotId, source, {
        maxPayload: this.nc.info?.max_payload ?? 1024 * 1024,
        purge: async (chunkSubject) => {
          const jsm = await this.nc.jetstreamManager();
          await jsm.streams.purge(`OBJ_${bucket}`, { filter: chunkSubject });
        },
      });
      return { sizeBytes: put.size, sha256: put.sha256 };
    } catch (err) {
      await this.delete(snapshotId).catch(() => {});
      source.destroy();
      throw err;
    }
  }

  /**
   * The stored bytes, after a first read found them whole (size and SHA-256 as recorded): a
   * damaged or truncated object is refused before a restore changes any file.
   */
  async open(snapshotId: string, expected: StoredSnapshot): Promise<Readable> {
    // One read from the store, checked as it is spooled to a local file (a node-local cache of
    // one restore), then handed out from that file: half the reads of verify-then-read.
    const dir = await mkdtemp(join(tmpdir(), 'sandstream-restore-'));
    const spool = join(dir, snapshotId);
    try {
      const out = createWriteStream(spool);
      await this.verify(snapshotId, expected, async (chunk) => {
        if (!out.write(chunk)) await once(out, 'drain');
      });
      out.end();
      await finished(out);
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    const stream = createReadStream(spool, { highWaterMark: 1 << 20 });
    stream.once('close', () => {
      rm(dir, { recursive: true, force: true }).catch(() => {});
    });
    return stream;
  }

  async verify(
    snapshotId: string,
    expected: StoredSnapshot,
    onChunk?: (chunk: Buffer) => Promise<void>,
  ): Promise<void> {
    for await (const chunk of this.checkedChunks(snapshotId, expected)) await onChunk?.(chunk);
  }

  /**
   * The stored bytes as they are read, hashed on the way: the stream fails at its end, naming
   * what is wrong, when they are not whole (size and SHA-256 as recorded). For a restore into a
   * new sandbox, which a failure throws away (a resume's start is retried on a clean one): its
   * writes overlap the read instead of waiting for a first whole read, as `open` makes them.
   */
  stream(snapshotId: string, expected: StoredSnapshot): Readable {
    return Readable.from(this.checkedChunks(snapshotId, expected), { objectMode: false });
  }

  private async *checkedChunks(snapshotId: string, expected: StoredSnapshot): AsyncGenerator<Buffer> {
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of await this.read(snapshotId)) {
      hash.update(chunk);
      size += chunk.length;
      yield chunk;
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

  private async read(snapshotId: string): Promise<AsyncIterable<Buffer>> {
    const os = await this.store();
    const info = await os.info(snapshotId);
    if (!info || info.deleted)
      throw new SnapshotIntegrityError(
        `snapshot ${snapshotId} has no stored bytes (deleted, or its upload never finished)`,
      );
    return readObjectChunks(this.nc.jetstream(), info);
  }

  /** Idempotent. */
  async delete(snapshotId: string): Promise<void> {
    const os = await this.store();
    const info = await os.info(snapshotId).catch(() => null);
    if (info) await os.delete(snapshotId);
  }

  /**
   * Chunk groups (nuids) the bucket's stream holds that no stored object names, each with how
   * many chunks it holds: what an upload killed mid-way leaves (its object's metadata is written
   * last), and uploads under way, whose count grows between two looks.
   */
  async unreferencedChunks(): Promise<UnreferencedChunkGroup[]> {
    const os = await this.store();
    const referenced = new Set((await os.list()).map((i) => i.nuid));
    const bucket = snapshotBucketName(this.namespace);
    const jsm = await this.nc.jetstreamManager();
    const info = await jsm.streams.info(`OBJ_${bucket}`, { subjects_filter: `$O.${bucket}.C.>` });
    const prefix = `$O.${bucket}.C.`;
    return Object.entries(info.state.subjects ?? {})
      .map(([subject, chunks]) => ({ nuid: subject.slice(prefix.length), chunks }))
      .filter(({ nuid }) => !referenced.has(nuid));
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
