import { posix } from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import type { Sandbox, WatchEvent } from '@sandstream/client';
import {
  EventType,
  type WatchDirRequest,
  type WatchDirResponseSchema,
} from '../gen/filesystem/filesystem_pb.js';
import { deadlineOf, keepaliveMsOf, timeoutSecondsOf } from './e2b-connect.js';
import { type EntryInfo, statEntry } from './e2b-file-ops.js';
import { EventQueue } from './event-queue.js';

type WatchDirMessage = MessageInitShape<typeof WatchDirResponseSchema>;

const EVENT_TYPES = {
  create: EventType.CREATE,
  write: EventType.WRITE,
  remove: EventType.REMOVE,
} as const satisfies Record<Exclude<WatchEvent['type'], 'watching'>, EventType>;

/**
 * filesystem.Filesystem/WatchDir (`files.watchDir`) on our watch step: the start event once the
 * watcher is in place in the sandbox, then each change as a FilesystemEvent {name, type}, until
 * the caller goes away (the watch is stopped) or its timeout (the SDK's timeoutMs) ends it.
 */
export async function watchDir(
  context: HandlerContext,
  sandbox: Sandbox,
  watch: WatchDirRequest,
): Promise<AsyncIterable<WatchDirMessage>> {
  const timeoutSeconds = timeoutSecondsOf(context);
  const queue = new EventQueue<WatchDirMessage>({
    keepalive: {
      everyMs: keepaliveMsOf(context),
      message: () => ({ event: { case: 'keepalive', value: {} } }),
    },
  });
  // The start event goes first; changes the watcher reports before it answers wait behind it.
  queue.push({ event: { case: 'start', value: {} } });
  // With includeEntry each change carries the entry as it is when told (a stat in the sandbox; none
  // for a removal, or for a file gone again by then). The stats run in order, so the events do.
  let told: Promise<void> = Promise.resolve();
  const tell = (event: { type: Exclude<WatchEvent['type'], 'watching'>; name: string }) => {
    const type = EVENT_TYPES[event.type];
    if (!watch.includeEntry) {
      queue.push({ event: { case: 'filesystem', value: { name: event.name, type } } });
      return;
    }
    const entryOf = (): Promise<EntryInfo | undefined> =>
      event.type === 'remove'
        ? Promise.resolve(undefined)
        : statEntry(sandbox, posix.join(watch.path, event.name)).catch(() => undefined);
    const stat = entryOf();
    told = told.then(async () => {
      const entry = await stat;
      queue.push({
        event: { case: 'filesystem', value: { name: event.name, type, ...(entry ? { entry } : {}) } },
      });
    });
  };
  // Started before the stream answers: a path that is no directory is the call's own error.
  const watching = await sandbox.files
    .watch(watch.path, {
      recursive: watch.recursive,
      ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
      onEvent: (event) => {
        const { type, name } = event;
        if (type !== 'watching') tell({ type, name });
      },
    })
    .catch((err: unknown) => {
      queue.end(); // its keepalives
      throw err;
    });
  const stop = () => void watching.stop().catch(() => {});
  context.signal.addEventListener('abort', stop, { once: true });
  // The end waits for the entries still being read: every change told is sent before it.
  watching.done.then(
    async (result) => {
      await told;
      if (result.timedOut) queue.end(new ConnectError('the watch timed out', Code.DeadlineExceeded));
      else if (result.errorMessage !== null && !result.cancelled)
        queue.end(new ConnectError(result.errorMessage, Code.Internal));
      // Stopped: by the caller going away, or at the call's deadline (a timeout all the same).
      else if (result.cancelled && deadlineOf(context)) queue.end(deadlineOf(context));
      else queue.end();
      context.signal.removeEventListener('abort', stop);
    },
    (err: unknown) => queue.end(err),
  );
  return queue;
}
