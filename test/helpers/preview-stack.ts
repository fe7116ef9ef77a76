import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dockerEngine, findCarrierImage } from '@sandstream/test-support';
import { type ApiStack, startApiStack } from './api-stack.js';
import { buildPreviewImage } from './preview-image.js';

const serverScript = readFileSync(fileURLToPath(new URL('../fixtures/preview-server.cjs', import.meta.url)));

export interface PreviewStack {
  s: ApiStack;
  key: string;
  /** Starts test/fixtures/preview-server.cjs on `port` in the sandbox; resolves once it answers through the proxy. */
  serve(sandbox: string, port: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The API stack on Docker sandboxes that join a bridge network of their own (Redis listening on
 * its gateway too), with the preview test image as the default: what the preview proxy's tests
 * and benchmark run against.
 */
export async function startPreviewStack(
  label: string,
  options: { apiNodeArgs?: string[]; apiEnv?: Record<string, string> } = {},
): Promise<PreviewStack> {
  const { docker } = await dockerEngine(label);
  const network = `sandstream-test-${label}-${randomBytes(3).toString('hex')}`;
  await docker.createNetwork({
    Name: network,
    Driver: 'bridge',
    Options: { 'com.docker.network.bridge.enable_icc': 'false' },
    Labels: { 'app.kubernetes.io/managed-by': 'sandstream-test' },
  });
  // Sandboxes a test left open outlive the services: removed with the network they joined.
  const removeNetwork = async () => {
    const left = await docker.listContainers({ all: true, filters: { network: [network] } });
    await Promise.all(
      left.map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    );
    await docker
      .getNetwork(network)
      .remove()
      .catch(() => {});
  };
  try {
    const info = (await docker.getNetwork(network).inspect()) as { IPAM: { Config: { Gateway: string }[] } };
    const gateway = info.IPAM.Config[0]?.Gateway as string;
    const image = await buildPreviewImage(docker);
    const s = await startApiStack({
      label,
      redisArgs: ['--bind', '127.0.0.1', gateway, '--protected-mode', 'no'],
      env: {
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_AGENT_CARRIER_IMAGE: findCarrierImage() ?? 'sandstream/agent-carrier:dev',
        SANDSTREAM_DOCKER_NETWORK: network,
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
      },
      apiEnv: {
        API_DEFAULT_IMAGE: image,
        API_ANONYMOUS: 'off',
        API_RATE_LIMIT_PER_MINUTE: '1000000',
        ...options.apiEnv,
      },
      ...(options.apiNodeArgs ? { apiNodeArgs: options.apiNodeArgs } : {}),
    });
    const { key } = await s.key('preview');
    const serve = async (sandbox: string, port: number) => {
      const put = await s.request(`/v1/sandboxes/${sandbox}/fs?path=/tmp/server.cjs`, {
        method: 'PUT',
        key,
        headers: { 'content-type': 'application/octet-stream' },
        body: serverScript,
      });
      if (put.status >= 300) throw new Error(`upload: ${put.status} ${await put.text()}`);
      const started = await s.request(`/v1/sandboxes/${sandbox}/processes`, {
        method: 'POST',
        key,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ command: 'node', args: ['/tmp/server.cjs', String(port)] }),
      });
      if (started.status !== 201) throw new Error(`start: ${started.status} ${await started.text()}`);
      const deadline = Date.now() + 30_000;
      while ((await s.request(`/v1/sandboxes/${sandbox}/proxy/${port}/ping`, { key })).status !== 200) {
        if (Date.now() > deadline) throw new Error(`port ${port} of ${sandbox} never answered`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    return {
      s,
      key,
      serve,
      stop: async () => {
        await s.stop();
        await removeNetwork();
      },
    };
  } catch (err) {
    await removeNetwork();
    throw err;
  }
}
