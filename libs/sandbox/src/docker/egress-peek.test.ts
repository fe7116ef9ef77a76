import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { httpRequestHost } from './http-host.js';
import { clientHelloServerName } from './tls-sni.js';

/** The first bytes a real TLS client (node:tls) sends for this server name. */
async function realClientHello(servername: string): Promise<Buffer> {
  const { connect: tlsConnect } = await import('node:tls');
  return new Promise((resolve) => {
    const server = createServer((socket) =>
      socket.once('data', (data) => {
        resolve(data);
        socket.destroy();
        server.close();
      }),
    );
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const tls = tlsConnect({ host: '127.0.0.1', port, servername });
      tls.on('error', () => {});
    });
  });
}

describe('egress proxy peeks', () => {
  it('reads the SNI of a real ClientHello, and waits for a whole record', async () => {
    const hello = await realClientHello('api.example.com');
    expect(clientHelloServerName(hello)).toBe('api.example.com');
    expect(clientHelloServerName(hello.subarray(0, hello.length - 1))).toBeUndefined();
    expect(clientHelloServerName(Buffer.from('GET / HTTP/1.1\r\n'))).toBeNull();
  });

  it('reads the Host of a request head, without its port', () => {
    expect(httpRequestHost(Buffer.from('GET / HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n'))).toBe(
      'example.com',
    );
    expect(httpRequestHost(Buffer.from('GET / HTTP/1.1\r\nHost: example.com\r\n'))).toBeUndefined();
    expect(httpRequestHost(Buffer.from('GET / HTTP/1.0\r\n\r\n'))).toBeNull();
  });
});
