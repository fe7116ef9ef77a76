import { connect, type Socket } from 'node:net';

/** What one read from the sandbox's port is given to; `done` hands its buffer back once it is written on. */
export type Reader = (bytes: Buffer, done: () => void) => boolean;

/** A connection to a sandbox's port whose reads go to the reader it is given (Node's `onread`). */
export interface Upstream {
  socket: Socket;
  /** Where reads go from now on; returning false from the reader pauses the socket. */
  onRead(reader: Reader): void;
}

/** Bytes per read, as Node's own reads; a download moves through a few of these, reused. */
const READ_BYTES = 64 * 1024;

/**
 * Read buffers reused across reads: a 50 MB download read into fresh buffers is 800 of them for
 * the garbage collector, which was a fifth of the proxy's CPU per byte. Kept free: up to 64.
 */
class ReadBuffers {
  private readonly free: Uint8Array[] = [];
  /** Buffers allocated so far (tests: reads reuse them). */
  made = 0;

  take(): Uint8Array {
    const reused = this.free.pop();
    if (reused) return reused;
    this.made++;
    return Buffer.allocUnsafe(READ_BYTES);
  }

  give(buffer: Uint8Array): void {
    if (this.free.length < 64) this.free.push(buffer);
  }
}

interface Idle {
  upstream: Upstream;
  /** Takes the idle watch off the connection (it goes back to work). */
  forget(): void;
}

/**
 * Kept-alive connections to sandboxes' ports for the preview proxy's pass-through GETs: one
 * request at a time each, idle ones kept a short while per origin. An idle connection that reads
 * anything (an early close, stray bytes) is dropped rather than trusted with the next request.
 */
export class UpstreamSockets {
  private readonly idle = new Map<string, Idle[]>();
  private readonly buffers = new ReadBuffers();

  constructor(
    // Below Node's default server keep-alive (5 s), so an app on Node closes after we stop using it.
    private readonly idleMs = 4000,
    private readonly maxIdlePerOrigin = 256,
  ) {}

  /** A connection to host:port, an idle one when there is one; rejects with the connect error. */
  async acquire(host: string, port: number): Promise<Upstream> {
    const list = this.idle.get(`${host}:${port}`);
    while (list && list.length > 0) {
      const idle = list.pop() as Idle;
      idle.forget();
      if (!idle.upstream.socket.destroyed && idle.upstream.socket.writable) return idle.upstream;
      idle.upstream.socket.destroy();
    }
    return new Promise<Upstream>((resolve, reject) => {
      let reader: Reader = (_bytes, done) => {
        done();
        return false;
      };
      const buffers = this.buffers;
      const socket = connect({
        host,
        port,
        noDelay: true,
        onread: {
          // Called for each next read: a free buffer, while the last one may still be being written.
          buffer: () => buffers.take(),
          callback: (nread, buffer) =>
            reader(Buffer.from(buffer.buffer, buffer.byteOffset, nread), () => buffers.give(buffer)),
        },
      });
      const failed = (err: Error) => reject(err);
      socket.once('error', failed);
      socket.once('connect', () => {
        socket.off('error', failed);
        resolve({
          socket,
          onRead: (next) => {
            reader = next;
          },
        });
      });
    });
  }

  /** Gives a connection whose last answer was read whole back for the next request. */
  release(host: string, port: number, upstream: Upstream): void {
    const { socket } = upstream;
    const key = `${host}:${port}`;
    let list = this.idle.get(key);
    if (!list) {
      list = [];
      this.idle.set(key, list);
    }
    if (socket.destroyed || list.length >= this.maxIdlePerOrigin) {
      socket.destroy();
      return;
    }
    const owner = list;
    const drop = () => {
      const at = owner.indexOf(idle);
      if (at !== -1) owner.splice(at, 1);
      if (owner.length === 0 && this.idle.get(key) === owner) this.idle.delete(key);
      idle.forget();
      socket.destroy();
    };
    const idle: Idle = {
      upstream,
      forget: () => {
        socket.off('end', drop).off('close', drop).off('error', drop).off('timeout', drop);
        socket.setTimeout(0);
        socket.pause();
      },
    };
    // Reading while idle, so that the app's close (or stray bytes) is seen at once.
    upstream.onRead((_bytes, done) => {
      done();
      drop();
      return false;
    });
    socket.on('end', drop).on('close', drop).on('error', drop).on('timeout', drop);
    socket.setTimeout(this.idleMs);
    socket.resume();
    owner.push(idle);
  }

  /** Read buffers allocated so far: a download reuses a few rather than making one per read. */
  get readBuffersMade(): number {
    return this.buffers.made;
  }

  /** Closes every idle connection (the API is stopping). */
  closeAll(): void {
    for (const list of this.idle.values()) for (const idle of list.splice(0)) idle.upstream.socket.destroy();
    this.idle.clear();
  }
}
