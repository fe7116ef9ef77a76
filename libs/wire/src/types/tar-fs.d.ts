// The part of tar-fs (no types of its own) that pack-tar.ts and unpack-tar.ts use.
declare module 'tar-fs' {
  import type { Readable, Writable } from 'node:stream';
  export interface PackOptions {
    entries?: string[];
    /** Called per entry's header (counts files). */
    map?: (header: { name: string; type: string }) => { name: string; type: string };
    /** The file system it reads through (node's fs by default). */
    fs?: typeof import('node:fs');
  }
  export interface ExtractOptions {
    /** Called per entry as it is written (counts files). */
    mapStream?: (stream: Readable, header: { name: string; type: string; size?: number }) => Readable;
  }
  export function pack(cwd: string, options?: PackOptions): Readable;
  export function extract(cwd: string, options?: ExtractOptions): Writable;
}
