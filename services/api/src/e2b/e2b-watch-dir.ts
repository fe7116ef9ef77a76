import type { Sandbox, WatchEvent } from '@sandstream/client';
import { Limits } from '@sandstream/wire';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ConnectServerStream, connectTimeoutMs } from './e2b-connect-stream.js';
import { unsupported } from './e2b-errors.js';
import type { WatchDirRequest } from './e2b-filesystem-schemas.js';

/** How often the stream says it is alive when the SDK does not ask (its Keepalive-Ping-Interval). */
const DEFAULT_KEEPALIVE_SECONDS = 50;

const EVENT_TYPES = {
  create: 'EVENT_TYPE_CREATE',
  write: 'EVENT_TYPE_WRITE',
  remove: 'EVENT_TYPE_REMOVE',
} as const satisfies Record<Exclude<WatchEvent['type'], 'watching'>, string>;

/**
 * filesystem.Filesystem/WatchDir (`files.watchDir`) on our watch step: the start event once the
 * watcher is in place in the sandbox, then each change as a FilesystemEvent {name, type}, until
 * the caller goes away (the watch is stopped) or its timeout (the SDK's timeoutMs) ends it.
 */
export async function watchDir(
  request: FastifyRequest,
  reply: FastifyReply,
  sandbox: Sandbox,
  watch: WatchDirRequest,
): Promise<void> {
  if (watch.includeEntry) throw unsupported('files.watchDir with includeEntry');
  const timeoutMs = connectTimeoutMs(request);
  const timeoutSeconds =
    timeoutMs === undefined ? undefined : Math.min(Limits.runMaxTimeoutSeconds, timeoutMs / 1000);
  const events: WatchEvent[] = [];
  let send: ((event: WatchEvent) => void) | undefined;
  // Started before the stream answers: a path that is no directory is the call's own error.
  const watching = await sandbox.files.watch(watch.path, {
    recursive: watch.recursive ?? false,
    ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
    onEvent: (event) => (send ? send(event) : events.push(event)),
  });
  const stream = new ConnectServerStream(request, reply);
  const asked = Number(request.headers['keepalive-ping-interval']);
  const seconds = Number.isFinite(asked) && asked > 0 ? asked : DEFAULT_KEEPALIVE_SECONDS;
  const keepalive = setInterval(() => stream.send({ keepalive: {} }), seconds * 1000);
  send = (event) => {
    if (event.type === 'watching') return;
    stream.send({ filesystem: { name: event.name, type: EVENT_TYPES[event.type] } });
  };
  stream.send({ start: {} });
  for (const event of events.splice(0)) send(event);
  const stop = () => void watching.stop().catch(() => {});
  stream.gone.signal.addEventListener('abort', stop, { once: true });
  try {
    const result = await watching.done;
    if (result.timedOut) stream.end({ code: 'deadline_exceeded', message: 'the watch timed out' });
    else if (result.errorMessage !== null && !result.cancelled)
      stream.end({ code: 'internal', message: result.errorMessage });
    else stream.end();
  } catch (err) {
    stream.fail(err);
  } finally {
    clearInterval(keepalive);
    stream.gone.signal.removeEventListener('abort', stop);
  }
}
