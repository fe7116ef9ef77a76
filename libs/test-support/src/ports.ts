import { createServer } from 'node:net';

/**
 * A TCP port that was free on `host` a moment ago (bound to port 0, then released), for a server
 * the test starts next. Another process can take it in between; on one test machine that is rare
 * enough, and the servers started here fail loudly when it happens.
 */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
