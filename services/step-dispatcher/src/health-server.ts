import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** GET /healthz: 200 with the report while `healthy()` holds, 503 otherwise. */
export async function startHealthServer(
  port: number,
  report: () => { healthy: boolean; [key: string]: unknown },
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.url !== '/healthz' && req.url !== '/readyz') {
      res.writeHead(404).end();
      return;
    }
    const body = report();
    res.writeHead(body.healthy ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return { server, port: (server.address() as AddressInfo).port };
}
