import { Agent, request } from 'node:http';

/**
 * A plain keep-alive HTTP/1.1 client on one socket, as an agent's tool loop in any language would
 * hold one: what the API benchmarks time an HTTP request with. `send` resolves with the body of
 * a 200 and rejects with the body of anything else; `close` ends the socket.
 */
export function keepAliveClient(headers: Record<string, string>) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const send = (url: string, method: string, payload?: string) =>
    new Promise<string>((resolve, reject) => {
      const req = request(
        url,
        {
          method,
          agent,
          headers: { ...headers, ...(payload ? { 'content-type': 'application/json' } : {}) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            text += c;
          });
          res.on('end', () => (res.statusCode === 200 ? resolve(text) : reject(new Error(text))));
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  return { send, close: () => agent.destroy() };
}
