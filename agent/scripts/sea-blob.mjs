/**
 * Reads and rewrites the blob `node --experimental-sea-config` prepares (Node 20.20, `useSnapshot`),
 * before postject writes it into the executable. Two rewrites, both for the agent's idle memory
 * (docs/agent.md, "Memory: what the single executable gives back"):
 *
 * - the builtins' code cache is dropped: Node's snapshot builder compiles every builtin module
 *   (~3 MB of code cache, http2 and all), and a starting process copies all of it into malloc'd
 *   memory it keeps for life. The modules the agent uses are already compiled in the snapshot's
 *   heap; the few it loads later (node:tls, node:http) compile from source on first use.
 * - the code path is padded so that the V8 startup data starts 16 bytes past a page boundary of
 *   the executable: Node copies that data into a malloc'd chunk of its own (a fresh mapping, its
 *   data 16 bytes into a page), and with both at the same offset within their pages
 *   sandstream-sea-release.node can map the file's pages over the copy's.
 *
 * Layout (node/src/node_sea.cc, node_snapshotable.cc; integers little-endian, strings as a u64
 * length and their bytes):
 *   SEA:      u32 magic, u32 flags, string code_path, string main (the snapshot)
 *   snapshot: u32 magic, u8 type, string node_version, string arch, string platform,
 *             u32 v8_cache_version_tag, u32 flags, u32 v8 size + V8 startup data,
 *             isolate_data_info, env_info, vector code_cache
 *   code_cache: u64 count, then per builtin: string id, u64 size + bytes
 */

const SEA_MAGIC = 0x143da20;
const SEA_FLAG_USE_SNAPSHOT = 1 << 1;
/** glibc's malloc: an mmapped chunk's user data follows its 16-byte header. */
export const MALLOC_CHUNK_HEADER = 16;
export const PAGE = 4096;

function readString(buf, at) {
  const length = Number(buf.readBigUInt64LE(at));
  return { text: buf.subarray(at + 8, at + 8 + length), end: at + 8 + length };
}

/** Offsets of the fields this file rewrites; throws when the blob is not the layout above. */
export function parseSeaBlob(buf) {
  if (buf.readUInt32LE(0) !== SEA_MAGIC) throw new Error('sea blob: bad magic (not Node 20.20?)');
  const flags = buf.readUInt32LE(4);
  if (!(flags & SEA_FLAG_USE_SNAPSHOT)) throw new Error('sea blob: not a snapshot blob');
  const codePath = readString(buf, 8);
  const mainLengthAt = codePath.end;
  const main = readString(buf, mainLengthAt);
  if (main.end !== buf.length) throw new Error('sea blob: trailing data after the snapshot');
  const snapshotStart = mainLengthAt + 8;
  let at = snapshotStart + 4 + 1; // magic, type
  for (let i = 0; i < 3; i++) at = readString(buf, at).end; // version, arch, platform
  at += 4 + 4; // v8_cache_version_tag, flags
  const v8Size = buf.readUInt32LE(at);
  const v8Start = at + 4;
  const v8End = v8Start + v8Size;
  return {
    codePathAt: 8,
    codePathEnd: codePath.end,
    mainLengthAt,
    v8Start,
    v8End,
    codeCacheAt: findCodeCache(buf, v8End),
  };
}

const ID = /^[A-Za-z0-9_\-/.]+$/;

/** Where the code cache vector (the snapshot's last field) starts: the first offset from which it parses to the end. */
function findCodeCache(buf, from) {
  for (let at = from; at + 8 <= buf.length; at++) {
    const count = buf.readBigUInt64LE(at);
    if (count > 10_000n) continue;
    let p = at + 8;
    let ok = true;
    for (let i = 0n; i < count && ok; i++) {
      if (p + 8 > buf.length) ok = false;
      else {
        const idLength = buf.readBigUInt64LE(p);
        if (idLength === 0n || idLength > 200n || p + 8 + Number(idLength) > buf.length) ok = false;
        else {
          const id = buf.toString('latin1', p + 8, p + 8 + Number(idLength));
          if (!ID.test(id)) ok = false;
          p += 8 + Number(idLength);
          if (ok && p + 8 <= buf.length) {
            const size = buf.readBigUInt64LE(p);
            if (p + 8 + Number(size) > buf.length) ok = false;
            else p += 8 + Number(size);
          } else ok = false;
        }
      }
    }
    if (ok && p === buf.length) return at;
  }
  throw new Error('sea blob: no code cache vector found at the end of the snapshot');
}

/** The blob with an empty code cache vector (the snapshot's size updated to match). */
export function withoutCodeCache(buf) {
  const layout = parseSeaBlob(buf);
  const out = Buffer.concat([buf.subarray(0, layout.codeCacheAt), Buffer.alloc(8)]);
  out.writeBigUInt64LE(BigInt(out.length - layout.mainLengthAt - 8), layout.mainLengthAt);
  return out;
}

/** The blob with `extra` more slashes after the code path's first one (the same file, for any reader). */
export function withPaddedCodePath(buf, extra) {
  if (extra === 0) return buf;
  const layout = parseSeaBlob(buf);
  const path = buf.toString('latin1', layout.codePathAt + 8, layout.codePathEnd);
  const slash = path.indexOf('/');
  if (slash < 0) throw new Error(`sea blob: code path ${path} has no slash to pad`);
  const padded = Buffer.from(`${path.slice(0, slash)}${'/'.repeat(extra)}${path.slice(slash)}`, 'latin1');
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(padded.length));
  return Buffer.concat([
    buf.subarray(0, layout.codePathAt),
    length,
    padded,
    buf.subarray(layout.codePathEnd),
  ]);
}

/** Slashes to add so that, written at file offset `blobAt`, the V8 data starts MALLOC_CHUNK_HEADER past a page. */
export function paddingToAlign(buf, blobAt) {
  const { v8Start } = parseSeaBlob(buf);
  return (((MALLOC_CHUNK_HEADER - (blobAt + v8Start)) % PAGE) + PAGE) % PAGE;
}
