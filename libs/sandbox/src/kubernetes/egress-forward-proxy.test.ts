import { request } from 'node:http';
import { KubeConfig, NetworkingV1Api } from '@kubernetes/client-node';
import { freePort } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressForwardProxy } from './egress-forward-proxy.js';
import { networkPolicyAccessLookup } from './egress-proxy-access.js';

/**
 * The proxy's answers to what is not a well-formed, authenticated request, and to an API server
 * that does not answer (a real client against a closed port): never a tunnel, always a reason.
 * Reaching names is tested from inside a pod in test/kubernetes-egress-proxy.test.ts.
 */
describe('EgressForwardProxy refusals', () => {
  let proxy: EgressForwardProxy;
  let port = 0;

  beforeAll(async () => {
    const kc = new KubeConfig();
    const closed = await freePort();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${closed}`, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    proxy = new EgressForwardProxy({
      access: networkPolicyAccessLookup(kc.makeApiClient(NetworkingV1Api), 'sandboxes'),
      host: '127.0.0.1',
    });
    port = await proxy.listen();
  });
  afterAll(() => proxy.close());

  const basic = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`;
  const ask = (method: string, path: string, auth?: string) =>
    new Promise<{ status: number; body: string; authenticate?: string }>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: auth ? { 'proxy-authorization': auth } : {},
      });
      const done = (res: import('node:http').IncomingMessage) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString();
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            ...(res.headers['proxy-authenticate']
              ? { authenticate: String(res.headers['proxy-authenticate']) }
              : {}),
          }),
        );
      };
      // A refused CONNECT still arrives as 'connect': its body is the head already read, and the rest.
      req.on('connect', (res, socket, head) => {
        let body = head.toString();
        socket.on('data', (c: Buffer) => {
          body += c.toString();
        });
        socket.on('close', () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            ...(res.headers['proxy-authenticate']
              ? { authenticate: String(res.headers['proxy-authenticate']) }
              : {}),
          }),
        );
      });
      req.on('response', done);
      req.on('error', reject);
      req.end();
    });

  it('asks for credentials it was not given', async () => {
    const answer = await ask('CONNECT', 'example.com:443');
    expect(answer).toMatchObject({ status: 407, authenticate: 'Basic realm="sandstream-egress"' });
    expect(answer.body).toBe('the egress proxy needs the sandbox name and token of its proxy URL\n');
    expect((await ask('GET', 'http://example.com/')).status).toBe(407);
  });

  it('answers 502 when the sandbox policy cannot be read, without the API error', async () => {
    const answer = await ask('CONNECT', 'example.com:443', basic('sbx-a:token'));
    expect(answer).toMatchObject({
      status: 502,
      body: "the sandbox's egress policy could not be read; try again\n",
    });
    expect((await ask('GET', 'http://example.com/', basic('sbx-a:token'))).status).toBe(502);
  });

  it('refuses what is neither CONNECT host:port nor an absolute http:// request, naming why', async () => {
    expect(await ask('CONNECT', 'example.com', basic('sbx-a:t'))).toMatchObject({
      status: 403,
      body: 'CONNECT needs host:port\n',
    });
    for (const path of ['/relative', 'https://example.com/', 'ftp://example.com/'])
      expect(await ask('GET', path, basic('sbx-a:t')), path).toMatchObject({
        status: 403,
        body: 'the egress proxy forwards absolute http:// requests and CONNECT only\n',
      });
  });

  it('looks up no name that is not a pod name (nothing sent to the API server)', async () => {
    // A path-like name never reaches the API: no access, so 407, not the 502 of an unread policy.
    expect((await ask('CONNECT', 'example.com:443', basic('../secrets/x:t'))).status).toBe(407);
  });
});
