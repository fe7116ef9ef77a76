// Local TCP ports for the processes the scripts start (npm start's services and embedded Redis,
// npm test's throwaway servers): one definition of "a port this machine will let us listen on".
import { createServer } from 'node:net';

/** Resolves the port it could bind on 127.0.0.1 (0: any free one), or null when it is taken. */
export function bindable(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(null));
    server.listen(port, '127.0.0.1', () => {
      const bound = server.address().port;
      server.close(() => resolve(bound));
    });
  });
}

/** Any free port on 127.0.0.1 (bound and released: the caller's child listens on it next). */
export async function freePort() {
  const port = await bindable(0);
  if (port === null) throw new Error('no free port on 127.0.0.1');
  return port;
}
