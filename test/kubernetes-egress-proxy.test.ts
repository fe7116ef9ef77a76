import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import type { CoreV1Api } from '@kubernetes/client-node';
import {
  canMakeOutsideHost,
  dockerEngine,
  freePort,
  type OutsideHost,
  startOutsideHost,
} from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxRef } from '../libs/sandbox/src/backend.js';
import {
  createKubernetesBackend,
  EgressForwardProxy,
  type KubernetesBackend,
  networkPolicyAccessLookup,
} from '../libs/sandbox/src/kubernetes/index.js';
import { type KubeSandboxes, startKubeSandboxes } from './helpers/kube-sandboxes.js';
import type { KubeApiStandin } from './kube-api-standin/index.js';
import { images } from './kubernetes-test-env.js';

/**
 * Issue 31 §2, domain allow-lists on Kubernetes: the pod is given HTTPS_PROXY / HTTP_PROXY naming
 * itself and its token, and the egress forward proxy lets it reach the names its NetworkPolicy
 * lists (CONNECT and absolute-form HTTP) and nothing else. The stand-in runs pods on the host's
 * network and stores policies without enforcing them, so what is checked from inside the pod is the
 * proxy's half; the policy's half (only the proxy reachable by name) is checked as an object. The
 * outside server lives at a public-looking address in a network namespace; the proxy's resolver
 * maps the test names to it.
 */
const { docker, skip } = await dockerEngine('kubernetes-egress-proxy');
const suffix = () => randomBytes(4).toString('hex');

/** One HTTP server on 80 and one on 443 (plain: the proxy never looks inside a CONNECT tunnel). */
const OUTSIDE = `
  const reply = (req, res) => res.end('outside ' + req.socket.localPort + ' ' + req.headers.host + ' ' + req.url + '\\n');
  require('node:http').createServer(reply).listen(80, 'ADDRESS');
  require('node:http').createServer(reply).listen(443, 'ADDRESS', () => console.log('ready'));`;

describe.skipIf(skip || !canMakeOutsideHost())(
  'Kubernetes domain allow-lists through the egress proxy',
  () => {
    const namespace = `k8sproxy-${suffix()}`;
    let k: KubeSandboxes;
    let standin: KubeApiStandin;
    let core: CoreV1Api;
    let backend: KubernetesBackend;
    let proxy: EgressForwardProxy;
    let outside: OutsideHost;
    let proxyPort = 0;

    beforeAll(async () => {
      outside = await startOutsideHost(OUTSIDE);
      proxyPort = await freePort();
      k = await startKubeSandboxes({
        docker,
        namespace,
        // The stand-in's pods share the host's network: the proxy is on this machine's loopback.
        backend: { egressProxy: { url: `http://127.0.0.1:${proxyPort}` } },
      });
      ({ standin, core, backend } = k);
      proxy = new EgressForwardProxy({
        access: networkPolicyAccessLookup(k.networking, namespace),
        resolve: async (name) => (name.endsWith('.test') ? [outside.address] : []),
        host: '127.0.0.1',
        port: proxyPort,
      });
      await proxy.listen();
    }, 60_000);

    afterAll(async () => {
      await k?.close();
      await proxy?.close();
      outside?.stop();
    });

    const start = (allow: string[]) =>
      k.start(k.request(`kproxy-${suffix()}`, { network: { egress: { allow } } }));

    /** A shell command in the pod's toolchain container (docker exec: the proxy runs in this process). */
    const inPod = async (ref: SandboxRef, command: string): Promise<string> => {
      const [container] = await docker.listContainers({
        filters: { label: [`kube-standin/pod=${ref.id}`, 'kube-standin/container=toolchain'] },
      });
      if (!container) throw new Error(`no toolchain container for ${ref.id}`);
      return new Promise((resolve) =>
        execFile(
          'docker',
          ['exec', container.Id, 'sh', '-c', command],
          { encoding: 'utf8' },
          (_e, out, err) => resolve(out + err),
        ),
      );
    };
    /**
     * Through the proxy its environment names, as a client would: the pod name and token from the
     * userinfo of HTTPS_PROXY in Proxy-Authorization: Basic. `user` replaces the pod name, `token`
     * the token (shell words); `after` is sent after the request head (inside a tunnel). `keepOpen`
     * holds the sending side open a while: busybox nc half-closes at the end of its input, which a
     * Node HTTP server (the proxy's absolute-form side) takes for an aborted request; curl, wget
     * and the package managers do not half-close.
     */
    // The shell's own expansions of $cred (user before the colon, token after), not templates.
    const SHELL_USER = `"$\{cred%%:*}"`;
    const SHELL_TOKEN = `"$\{cred#*:}"`;
    const viaProxy = (
      ref: SandboxRef,
      request: string,
      options: { user?: string; token?: string; after?: string; keepOpen?: boolean } = {},
    ) =>
      inPod(
        ref,
        `cred=$(echo "$HTTPS_PROXY" | sed -E 's#^http://([^@]*)@.*#\\1#'); ` +
          `user=${options.user ?? SHELL_USER}; token=${options.token ?? SHELL_TOKEN}; ` +
          `auth=$(printf '%s:%s' "$user" "$token" | base64 | tr -d '\\n'); ` +
          `{ printf '${request.replaceAll('\n', '\\r\\n')}Proxy-Authorization: Basic %s\\r\\n\\r\\n' "$auth"; ` +
          `printf '${(options.after ?? '').replaceAll('\n', '\\r\\n')}'; ${options.keepOpen ? 'sleep 2; ' : ''}} | nc -w 5 127.0.0.1 ${proxyPort}`,
      );
    const connect = (ref: SandboxRef, target: string, options?: { user?: string; token?: string }) =>
      viaProxy(ref, `CONNECT ${target} HTTP/1.1\nHost: ${target}\n`, options);

    it('reaches the listed names by CONNECT and absolute-form HTTP, nothing else; a live update applies to the next connection', async () => {
      const ref = await start(['allowed.test', '*.wild.test', '203.0.113.0/24', `${outside.address}:80`]);
      const pod = await core.readNamespacedPod({ name: ref.id, namespace });
      const env = pod.spec?.containers.find((c) => c.name === 'toolchain')?.env ?? [];
      const proxyUrl = env.find((e) => e.name === 'HTTPS_PROXY')?.value ?? '';
      expect(proxyUrl).toMatch(
        new RegExp(`^http://${ref.id}:[A-Za-z0-9_-]{43}@127\\.0\\.0\\.1:${proxyPort}$`),
      );
      expect(env.find((e) => e.name === 'http_proxy')?.value).toBe(proxyUrl);
      // The token is on the pod only: the policy holds its hash.
      const policy = await k.networking.readNamespacedNetworkPolicy({ name: `${ref.id}-egress`, namespace });
      expect(JSON.stringify(policy)).not.toContain(proxyUrl.split(':')[2]?.split('@')[0]);
      expect(JSON.stringify(policy.spec?.egress)).toContain(`"port":${proxyPort}`);

      // A tunnel to an allowed name: the bytes after CONNECT reach the outside server unchanged.
      const tunnel = await viaProxy(ref, 'CONNECT allowed.test:443 HTTP/1.1\nHost: allowed.test:443\n', {
        after: 'GET /t HTTP/1.0\nHost: allowed.test\n\n',
      });
      expect(tunnel).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n/);
      expect(tunnel).toContain('outside 443 allowed.test /t\n');
      // Absolute-form HTTP, the wildcard's subdomain.
      const http = await viaProxy(
        ref,
        'GET http://a.wild.test/page?x=1 HTTP/1.1\nHost: a.wild.test\nConnection: close\n',
        { keepOpen: true },
      );
      expect(http).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(http).toContain('outside 80 a.wild.test /page?x=1\n');

      // Not listed, the wildcard's own apex, an address, another port: refused with the reason.
      for (const target of ['other.test:443', 'wild.test:443']) {
        const answer = await connect(ref, target);
        expect(answer, target).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
        expect(answer, target).toContain(
          `${target.split(':')[0]} is not on this sandbox's egress allow-list`,
        );
      }
      expect(await connect(ref, 'allowed.test:8080')).toContain(
        'port 8080: domains are reached on 80 and 443 only',
      );
      // A wrong token, or this token under another sandbox's name: 407, nothing reached.
      for (const forged of [{ token: 'not-the-token' }, { user: 'sbx-other' }]) {
        const answer = await connect(ref, 'allowed.test:443', forged);
        expect(answer, JSON.stringify(forged)).toMatch(/^HTTP\/1\.1 407 Proxy Authentication Required\r\n/);
        expect(answer).not.toContain('outside');
      }

      // An address the list names with its port is reached through the proxy too (the pod's
      // clients send everything there); its other ports are not.
      const byAddress = await viaProxy(
        ref,
        `GET http://${outside.address}/a HTTP/1.1\nHost: ${outside.address}\nConnection: close\n`,
        { keepOpen: true },
      );
      expect(byAddress).toContain(`outside 80 ${outside.address} /a\n`);
      expect(await connect(ref, `${outside.address}:443`)).toContain(
        `${outside.address}:443 is not on this sandbox's egress allow-list`,
      );

      // Narrowed live to CIDRs: the next connection by name is refused; widened again, allowed.
      await backend.updateNetwork!(ref, { egress: { allow: ['203.0.113.0/24'] } });
      expect(await connect(ref, 'allowed.test:443')).toMatch(/^HTTP\/1\.1 403 /);
      await backend.updateNetwork!(ref, { egress: { allow: ['allowed.test'] } });
      expect(await connect(ref, 'allowed.test:443')).toMatch(/^HTTP\/1\.1 200 /);
      // `internet`: any name resolving to a public address, on any port, through the proxy.
      await backend.updateNetwork!(ref, { egress: 'internet' });
      for (const target of ['other.test:443', 'other.test:80', `${outside.address}:443`])
        expect(await connect(ref, target), target).toMatch(/^HTTP\/1\.1 200 /);
      expect(await connect(ref, 'unresolvable.example:443')).toContain(
        'unresolvable.example resolves to no address this sandbox may reach',
      );
      await backend.updateNetwork!(ref, { egress: 'none' });
      expect(await connect(ref, 'allowed.test:443')).toContain('this sandbox\'s egress is "none"');
    }, 120_000);

    it('a sandbox started without domains gets no proxy, and a later update to domains is refused, saying why', async () => {
      const ref = await start(['203.0.113.0/24']);
      const pod = await core.readNamespacedPod({ name: ref.id, namespace });
      const names = (pod.spec?.containers.find((c) => c.name === 'toolchain')?.env ?? []).map((e) => e.name);
      expect(names).not.toContain('HTTPS_PROXY');
      await expect(backend.updateNetwork!(ref, { egress: { allow: ['allowed.test'] } })).rejects.toThrow(
        /^network\.egress\.allow\[0\] "allowed\.test": domain entries go through the egress proxy, and this sandbox was started without it/,
      );
    }, 60_000);

    it('serve() runs the proxy on egressProxy.listenPort with the backend: it asks the policies, close() stops it', async () => {
      const port = await freePort();
      const serving = createKubernetesBackend({
        allowOpenRedis: true,
        kubeConfig: standin.kubeConfig(namespace),
        namespace,
        agentCarrierImage: images.carrier,
        egressProxy: { url: `http://127.0.0.1:${port}`, listenPort: port },
      });
      await serving.serve();
      const ask = () =>
        new Promise<number | string>((resolve) => {
          const req = request({
            host: '127.0.0.1',
            port,
            method: 'CONNECT',
            path: 'allowed.test:443',
            headers: { 'proxy-authorization': `Basic ${Buffer.from('sbx-nobody:x').toString('base64')}` },
          });
          req.on('connect', (res, socket) => {
            socket.destroy();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
          req.end();
        });
      try {
        expect(await ask()).toBe(407);
      } finally {
        await serving.close();
      }
      expect(await ask()).toBe('ECONNREFUSED');
    });
  },
);
