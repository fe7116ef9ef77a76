import { parentPort } from 'node:worker_threads';
import { type EntryOp, EntryOps } from './entry-ops.js';
import { copyTreeSync, replaceTreeContentsSync } from './tree-copy-sync.js';

/**
 * The writer thread: applies the batches of every restore in this process (each its own session,
 * in the order they were sent) and acknowledges each batch, or says why it failed. After a
 * failure the session's later batches are skipped: the main thread throws the first error.
 */

/** A tree copied (tree-copy.ts): `from`'s children into `to`, what `to` held removed first if `replace`. */
export interface TreeCopyRequest {
  from: string;
  to: string;
  replace: boolean;
}

/** Main thread → writer thread. */
export type WriterRequest =
  | { session: number; batch: number; ops: EntryOp[]; data: ArrayBuffer | undefined }
  | { session: number; batch: number; copy: TreeCopyRequest }
  | { session: number; close: true };

/** Writer thread → main thread: one per batch. */
export interface WriterReply {
  session: number;
  batch: number;
  error?: { message: string; code?: string };
  /** A copy's: the names it removed from its target. */
  removed?: number;
  /** The batch's data buffer, handed back (transferred) for the next batch to reuse. */
  data?: ArrayBuffer;
}

const port = parentPort;
if (!port) throw new Error('entry-writer-thread runs as a worker thread (entry-writer.ts starts it)');

const sessions = new Map<number, { ops: EntryOps; failed: boolean }>();

port.on('message', (request: WriterRequest) => {
  if ('close' in request) {
    sessions.get(request.session)?.ops.close();
    sessions.delete(request.session);
    return;
  }
  if ('copy' in request) {
    const reply: WriterReply = { session: request.session, batch: request.batch };
    const { from, to, replace } = request.copy;
    try {
      if (replace) reply.removed = replaceTreeContentsSync(to, from);
      else copyTreeSync(from, to);
    } catch (err) {
      const { message, code } = err as NodeJS.ErrnoException;
      reply.error = code ? { message, code } : { message };
    }
    port.postMessage(reply);
    return;
  }
  let session = sessions.get(request.session);
  if (!session) {
    session = { ops: new EntryOps(), failed: false };
    sessions.set(request.session, session);
  }
  const reply: WriterReply = { session: request.session, batch: request.batch };
  if (!session.failed) {
    const data = request.data ? Buffer.from(request.data) : Buffer.alloc(0);
    try {
      for (const op of request.ops) session.ops.apply(op, data);
    } catch (err) {
      session.failed = true;
      const { message, code } = err as NodeJS.ErrnoException;
      reply.error = code ? { message, code } : { message };
    }
  }
  // Written (or skipped): the buffer goes back, so the main thread need not zero a new one.
  if (request.data) reply.data = request.data;
  port.postMessage(reply, request.data ? [request.data] : []);
});
