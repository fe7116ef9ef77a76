/** Types of sea-blob.mjs, for the tests that read a built executable's blob with it. */
export interface SeaBlobLayout {
  codePathAt: number;
  codePathEnd: number;
  mainLengthAt: number;
  v8Start: number;
  v8End: number;
  codeCacheAt: number;
}
export const MALLOC_CHUNK_HEADER: number;
export const PAGE: number;
export function parseSeaBlob(buf: Buffer): SeaBlobLayout;
export function withoutCodeCache(buf: Buffer): Buffer;
export function withPaddedCodePath(buf: Buffer, extra: number): Buffer;
export function paddingToAlign(buf: Buffer, blobAt: number): number;
