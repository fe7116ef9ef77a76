import { type Client, Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ApiKeyStore, createKeySpace } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiContext } from '../api-context.js';
import { buildApi } from '../app.js';
import { Filesystem } from '../gen/filesystem/filesystem_pb.js';
import { Process } from '../gen/process/process_pb.js';
import { Principals } from '../principal.js';
import { WorkQueues } from '../work-queues.js';

// The E2B in-sandbox services as connect-fastify's plugin serves them, in-process on the shared
// Redis (keys under their own namespace), through a Connect client speaking binary protobuf
// (the SDK speaks JSON: test/api/e2b-sdk.test.ts): our errors reach a Connect client by their
// codes and messages, unary and streamed, before and inside the plugin. No sandbox is running
// here: every call ends in an error, which is what is looked at.
describe('the E2B Connect services (binary protobuf)', () => {
  const namespace = uniqueNamespace('e2b-connect');
  const redis = connectTestRedis();
  const keys = createKeySpace(namespace);
  const sdk = new SandstreamClient({ redis, namespace });
  const queues = new WorkQueues(redis, keys);
  let app: Awaited<ReturnType<typeof buildApi>>;
  let processes: Client<typeof Process>;
  let files: Client<typeof Filesystem>;
  let key = '';

  beforeAll(async () => {
    const store = new ApiKeyStore({ redis, keys });
    key = (await store.create({ tenant: 'acme' })).key;
    const ctx: ApiContext = {
      client: sdk,
      redis,
      queues,
      keys,
      principals: new Principals({ store, redis, keys, anonymous: 'off' }),
      templates: undefined,
      defaults: { template: undefined, image: 'sandstream/debian:bookworm' },
    };
    app = await buildApi(ctx, { bodyLimit: 1024 * 1024, rateLimitPerMinute: 600 });
    const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 });
    const transport = createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: true });
    processes = createClient(Process, transport);
    files = createClient(Filesystem, transport);
  });
  afterAll(async () => {
    await app?.close();
    await queues.close();
    await sdk.close();
    await deleteNamespaceKeys(redis, namespace);
    redis.disconnect();
  });

  const headers = (sandbox = 'sbx-none', bearer = key) => ({
    authorization: `Bearer ${bearer}`,
    'e2b-sandbox-id': sandbox,
  });

  async function errorOf(call: Promise<unknown> | AsyncIterable<unknown>): Promise<ConnectError> {
    try {
      if (Symbol.asyncIterator in call) for await (const _ of call);
      else await call;
    } catch (err) {
      return ConnectError.from(err);
    }
    throw new Error('the call did not fail');
  }

  it('answers a unary call on an unknown sandbox not_found, naming it', async () => {
    const err = await errorOf(processes.list({}, { headers: headers('sbx-missing') }));
    expect(err.code).toBe(Code.NotFound);
    expect(err.rawMessage).toMatch(/sbx-missing/);
    const stat = await errorOf(files.stat({ path: '/tmp' }, { headers: headers('sbx-missing') }));
    expect(stat.code).toBe(Code.NotFound);
  });

  it("ends a server stream with the call's error: not_found, and a missing field by its name", async () => {
    const start = { process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi'] } };
    const missing = await errorOf(processes.start(start, { headers: headers('sbx-missing') }));
    expect(missing.code).toBe(Code.NotFound);
    const noCmd = await errorOf(processes.start({ process: { cmd: '' } }, { headers: headers() }));
    expect(noCmd.code).toBe(Code.InvalidArgument);
    expect(noCmd.rawMessage).toBe('process.Process/Start: process.cmd: process.cmd is required');
    const wide = await errorOf(
      processes.start(
        { process: { cmd: '/bin/bash' }, pty: { size: { cols: 100_000, rows: 24 } } },
        { headers: headers() },
      ),
    );
    expect(wide.code).toBe(Code.InvalidArgument);
    expect(wide.rawMessage).toMatch(/pty\.size\.cols is at most \d+/);
  });

  it('refuses a stream before the plugin sees it: a bad key is unauthenticated, a missing header invalid', async () => {
    const bad = await errorOf(
      files.watchDir({ path: '/tmp' }, { headers: headers('sbx-none', 'not-a-key') }),
    );
    expect(bad.code).toBe(Code.Unauthenticated);
    const noHeader = await errorOf(processes.list({}, { headers: { authorization: `Bearer ${key}` } }));
    expect(noHeader.code).toBe(Code.InvalidArgument);
    expect(noHeader.rawMessage).toMatch(/E2b-Sandbox-Id header is required/);
  });

  it('says which call it does not serve', async () => {
    const err = await errorOf(files.createWatcher({ path: '/tmp' }, { headers: headers() }));
    expect(err.code).toBe(Code.Unimplemented);
    expect(err.rawMessage).toMatch(/filesystem\.Filesystem\/CreateWatcher/);
  });
});
