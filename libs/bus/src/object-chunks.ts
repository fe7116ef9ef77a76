import { createHash } from 'node:crypto';
import type { JetStreamClient, ObjectInfo, PubAck } from 'nats';

/** Chunk size asked for; the server's max_payload caps it (1 MB by default). */
const CHUNK_BYTES = 1 << 20;
/** Chunks published and not yet acknowledged at most: what an upload holds in memory. */
const PUBLISH_WINDOW = 8;

/** What `putObjectChunks` stored: the object store's own record of it says the same. */
export interface PutObjectResult {
  size: number;
  chunks: number;
  /** SHA-256 of the object's bytes, hex. */
  sha256: string;
}

/**
 * Writes an object into a JetStream object store bucket exactly as nats.js's `ObjectStore.put`
 * lays it out (chunks on `$O.<bucket>.C.<nuid>`, then the metadata, rolled up, on
 * `$O.<bucket>.M.<name>`), so `info`, `list`, `get` and `delete` of the same bucket read it. Why
 * not `put`: it hashes every chunk with a SHA-256 written in JavaScript (js-sha256), which cost
 * more than compressing the snapshot; here Node's native hash serves both the object store's
 * digest and the caller's record, and chunks are 1 MB with 8 acknowledgements outstanding.
 * On a failure the chunks published so far are purged, as `put` does.
 */
export async function putObjectChunks(
  js: JetStreamClient,
  bucket: string,
  name: string,
  source: AsyncIterable<Buffer>,
  options: { maxPayload: number; purge: (chunkSubject: string) => Promise<void> },
): Promise<PutObjectResult> {
  // Loaded when used: bus' index carries this module to clients that never touch NATS.
  const { nuid, headers, JsHeaders } = await import('nats');
  const chunkBytes = Math.min(CHUNK_BYTES, options.maxPayload);
  const id = nuid.next();
  const chunkSubject = `$O.${bucket}.C.${id}`;
  const hash = createHash('sha256');
  const acks = new Set<Promise<PubAck>>();
  let failure: Error | undefined;
  let size = 0;
  let chunks = 0;
  const publish = async (payload: Buffer) => {
    while (acks.size >= PUBLISH_WINDOW) await Promise.race(acks);
    if (failure) throw failure;
    hash.update(payload);
    size += payload.length;
    chunks++;
    const ack = js.publish(chunkSubject, payload);
    acks.add(ack);
    ack.then(
      () => acks.delete(ack),
      (err: Error) => {
        acks.delete(ack);
        failure ??= err;
      },
    );
  };
  try {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    for await (const piece of source) {
      let rest = piece;
      while (pendingBytes + rest.length >= chunkBytes) {
        const take = chunkBytes - pendingBytes;
        pending.push(rest.subarray(0, take));
        await publish(pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, chunkBytes));
        rest = rest.subarray(take);
        pending = [];
        pendingBytes = 0;
      }
      if (rest.length > 0) {
        pending.push(rest);
        pendingBytes += rest.length;
      }
    }
    if (pendingBytes > 0) await publish(Buffer.concat(pending, pendingBytes));
    await Promise.all(acks);
    if (failure) throw failure;
    const digest = hash.digest();
    const info = {
      name,
      description: '',
      options: { max_chunk_size: chunkBytes },
      bucket,
      nuid: id,
      size,
      chunks,
      mtime: new Date().toISOString(),
      digest: `SHA-256=${paddedBase64Url(digest)}`,
      deleted: false,
    };
    const h = headers();
    h.set(JsHeaders.RollupHdr, JsHeaders.RollupValueSubject);
    await js.publish(metaSubject(bucket, name), JSON.stringify(info), { headers: h });
    return { size, chunks, sha256: digest.toString('hex') };
  } catch (err) {
    await Promise.allSettled(acks);
    await options.purge(chunkSubject).catch(() => {});
    throw err;
  }
}

/** The metadata subject of `name`: the name in padded URL-safe base64, as nats.js writes it. */
function metaSubject(bucket: string, name: string): string {
  return `$O.${bucket}.M.${paddedBase64Url(Buffer.from(name))}`;
}

function paddedBase64Url(bytes: Buffer): string {
  const b64 = bytes.toString('base64url');
  return b64 + '='.repeat((4 - (b64.length % 4)) % 4);
}

/**
 * An object's chunks in order, through an ordered consumer on its chunk subject, without the
 * JavaScript SHA-256 of nats.js's `get` (the caller checks the bytes against its own record).
 */
export async function* readObjectChunks(js: JetStreamClient, info: ObjectInfo): AsyncGenerator<Buffer> {
  const { consumerOpts } = await import('nats');
  if (info.size === 0) return;
  const sub = await js.subscribe(`$O.${info.bucket}.C.${info.nuid}`, consumerOpts().orderedConsumer());
  try {
    for await (const message of sub) {
      const data = message.data;
      if (data.length > 0) yield Buffer.from(data.buffer, data.byteOffset, data.length);
      if (message.info.pending === 0) return;
    }
  } finally {
    sub.unsubscribe();
  }
}
