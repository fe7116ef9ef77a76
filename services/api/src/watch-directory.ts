import type { Sandbox, WatchEvent } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { WatchBody } from './schemas.js';
import { SseStream } from './sse.js';

/**
 * Watches a directory for an HTTP request, as a command's event stream (what the SDK's HTTP
 * transport follows for `files.watch`): `started` with the watch's command id once the watcher
 * is in place, then one `stdout` line per change (the agent's JSON, the first saying `watching`),
 * then its `result` when it ends (timed out, stopped by DELETE …/exec/{id} or a cancel). A client
 * that goes away stops the watch.
 */
export async function watchForRequest(
  files: Sandbox['files'],
  body: WatchBody,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const sse = new SseStream(request, reply);
  let seq = 0;
  const line = (text: string) => sse.send('stdout', { stream: 'stdout', line: text, seq: seq++ });
  // Changes seen between the watcher's first line and the call's answer wait for `started`.
  let held: WatchEvent[] | undefined = [];
  try {
    const watch = await files.watch(body.path, {
      ...(body.recursive !== undefined ? { recursive: body.recursive } : {}),
      ...(body.timeoutSeconds !== undefined ? { timeoutSeconds: body.timeoutSeconds } : {}),
      onEvent: (event) => {
        if (held) held.push(event);
        else void line(JSON.stringify(event));
      },
    });
    const stop = () => void watch.stop().catch(() => {});
    sse.signal.addEventListener('abort', stop, { once: true });
    await sse.send('started', { commandId: watch.id });
    await line(JSON.stringify({ type: 'watching', name: '' } satisfies WatchEvent));
    for (const event of held) await line(JSON.stringify(event));
    held = undefined;
    const result = await watch.done;
    sse.signal.removeEventListener('abort', stop);
    await sse.send('result', result);
    sse.end();
  } catch (err) {
    await sse.fail(err);
  }
  return reply;
}
