import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WriterReply, WriterRequest } from './entry-writer-thread.js';

/**
 * The one writer thread of this process, shared by every restore (a session each), started on
 * the first restore and kept: a thread's start (~30 ms, a V8 isolate and its modules) would
 * otherwise be paid by each fork's restore. It keeps the process alive only while a batch is
 * outstanding. If it dies, every session waiting on it fails and the next restore starts another.
 */

/** How a session hears about its batches. */
export interface SessionListener {
  reply(reply: WriterReply): void;
  /** The thread died: nothing more will be acknowledged. */
  lost(err: Error): void;
}

/**
 * The thread's compiled module. Tests run this library's TypeScript sources (vitest.config.ts),
 * which a worker thread cannot load: they use the built one, as the services they start do.
 */
function threadModule(): URL {
  const sibling = new URL('./entry-writer-thread.js', import.meta.url);
  if (!import.meta.url.endsWith('.ts') || existsSync(fileURLToPath(sibling))) return sibling;
  return new URL('../../dist/snapshot/entry-writer-thread.js', import.meta.url);
}

class WriterThread {
  private readonly worker: Worker;
  private readonly listeners = new Map<number, SessionListener>();
  private outstanding = 0;
  dead = false;

  constructor() {
    this.worker = new Worker(threadModule());
    this.worker.unref();
    this.worker.on('message', (reply: WriterReply) => {
      this.outstanding--;
      if (this.outstanding === 0) this.worker.unref();
      this.listeners.get(reply.session)?.reply(reply);
    });
    const lost = (err: Error) => {
      this.dead = true;
      for (const listener of this.listeners.values()) listener.lost(err);
      this.listeners.clear();
    };
    this.worker.on('error', lost);
    this.worker.on('exit', (code) => lost(new Error(`the restore's writer thread exited (code ${code})`)));
  }

  listen(session: number, listener: SessionListener): void {
    this.listeners.set(session, listener);
  }

  send(request: WriterRequest, transfer: ArrayBuffer[]): void {
    if ('batch' in request) {
      if (this.outstanding === 0) this.worker.ref();
      this.outstanding++;
    } else {
      this.listeners.delete(request.session);
    }
    this.worker.postMessage(request, transfer);
  }
}

let shared: WriterThread | undefined;
let nextSession = 1;

/** A new session on the shared writer thread (started if there is none, or it died). */
export function openSession(listener: SessionListener): {
  session: number;
  send: (request: WriterRequest, transfer: ArrayBuffer[]) => void;
} {
  if (!shared || shared.dead) shared = new WriterThread();
  const thread = shared;
  const session = nextSession++;
  thread.listen(session, listener);
  return {
    session,
    send: (request, transfer) => {
      if (thread.dead) throw new Error("the restore's writer thread is gone");
      thread.send(request, transfer);
    },
  };
}
