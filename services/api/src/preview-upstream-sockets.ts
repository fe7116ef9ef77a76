import { connect, type Socket } from 'node:net';

interface Idle {
  socket: Socket;
  /** Takes the idle watch off the socket (it goes back to work). */
  forget(): void;
}

/**
 * Kept-alive connections to sandboxes' ports for the preview proxy's pass-through GETs: one
 * request at a time each, idle ones kept a short while per origin. An idle connection that reads
 * anything (an early close, stray bytes) is dropped rather than trusted with the next request.
 */
export class UpstreamSockets {
  private readonly idle = new Map<string, Idle[]>();

  constructor(
    // Below Node's default server keep-alive (5 s), so an app on Node closes after we stop using it.
    private readonly idleMs = 4000,
    private readonly maxIdlePerOrigin = 256,
  ) {}

  /** A connection to host:port, an idle one when there is one; rejects with the connect error. */
  async acquire(host: string, port: number): Promise<Socket> {
    const list = this.idle.get(`${host}:${port}`);
    while (list && list.length > 0) {
      const idle = list.pop() as Idle;
      idle.forget();
      if (!idle.socket.destroyed && idle.socket.writable) return idle.socket;
      idle.socket.destroy();
    }
    return new Promise<Socket>((resolve, reject) => {
      const socket = connect({ host, port, noDelay: true });
      const failed = (err: Error) => reject(err);
      socket.once('error', failed);
      socket.once('connect', () => {
        socket.off('error', failed);
        resolve(socket);
      });
    });
  }

  /** Gives a connection whose last answer was read whole back for the next request. */
  release(host: string, port: number, socket: Socket): void {
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
      socket,
      forget: () => {
        socket.off('data', drop).off('end', drop).off('close', drop).off('error', drop).off('timeout', drop);
        socket.setTimeout(0);
        socket.pause();
      },
    };
    // Flowing while idle, so that the app's close is seen at once.
    socket.on('data', drop).on('end', drop).on('close', drop).on('error', drop).on('timeout', drop);
    socket.setTimeout(this.idleMs);
    socket.resume();
    owner.push(idle);
  }

  /** Closes every idle connection (the API is stopping). */
  closeAll(): void {
    for (const list of this.idle.values()) for (const idle of list.splice(0)) idle.socket.destroy();
    this.idle.clear();
  }
}
