import type { Server } from 'node:http';

/**
 * `Expect: 100-continue` (the SDK's file writes send it): a body the API would refuse from its
 * headers alone (a Content-Length over the limit) is not invited, so the client gets the 413
 * without sending it; any other is invited as Node would do by itself. Without this, Node sent
 * `100 Continue` to every such request, the client sent the whole body and the API's early 413
 * raced it, often lost to an EPIPE on the client (issue 33 §2). A tar stream is not bounded by
 * the body limit (its transfer's maxBytes is), so it is always invited.
 */
export function answerBeforeBody(server: Server, bodyLimit: number): void {
  server.on('checkContinue', (req, res) => {
    const length = Number(req.headers['content-length']);
    const streamed = (req.headers['content-type'] ?? '').startsWith('application/x-tar');
    if (streamed || !(length > bodyLimit)) res.writeContinue();
    // Routed as usual: Fastify refuses the body over the limit from its Content-Length (413).
    server.emit('request', req, res);
  });
}
