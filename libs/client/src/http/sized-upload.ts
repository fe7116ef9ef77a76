import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';

/**
 * How long to wait for the API's `100 Continue` before sending the body anyway: a proxy in
 * between may not pass it on (curl waits 1 s the same way).
 */
const CONTINUE_WAIT_MS = 1_000;

/**
 * Sends a body of known size with `Expect: 100-continue` (node:http; Node's fetch cannot): the API
 * looks at the headers first and either invites the body or answers at once (413 for one over its
 * limit). A refused 50 MB write then costs its headers, not 50 MB sent into a socket the API is
 * closing, which broke mid-upload with EPIPE and hid the API's answer (issue 33 §2).
 * Resolves with the API's answer as a fetch Response, whatever its status; rejects when the API
 * could not be reached.
 */
export function sendSized(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: Uint8Array,
): Promise<Response> {
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(url, {
      method,
      headers: { ...headers, 'content-length': String(body.byteLength), expect: '100-continue' },
    });
    let sent = false;
    const sendBody = () => {
      if (sent) return;
      sent = true;
      clearTimeout(timer);
      req.end(body);
    };
    const timer = setTimeout(sendBody, CONTINUE_WAIT_MS);
    req.on('continue', sendBody);
    req.on('response', (res) => {
      clearTimeout(timer);
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        // Answered before the body went: the socket still owes it, so it cannot be reused.
        if (!sent) req.destroy();
        const status = res.statusCode ?? 502;
        const payload = status === 204 || status === 304 ? null : Buffer.concat(chunks);
        resolve(
          new Response(payload, {
            status,
            statusText: res.statusMessage ?? '',
            headers: headersOf(res.headers),
          }),
        );
      });
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

function headersOf(incoming: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  return headers;
}
