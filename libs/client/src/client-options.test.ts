import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { SandstreamClient, SandstreamOptionsError } from './client.js';

// lazyConnect: these tests check option handling only and must not open a connection.
const redis = new Redis({ lazyConnect: true });

afterAll(() => redis.disconnect());

describe('SandstreamClient options', () => {
  it('takes `namespace` (the name the CLI and the services use)', () => {
    expect(new SandstreamClient({ redis, namespace: 'ns-opt' }).keys.namespace).toBe('ns-opt');
  });

  it('refuses the old `prefix` by name, pointing at `namespace`', () => {
    expect(() => new SandstreamClient({ redis, prefix: 'ns-opt' } as never)).toThrow(SandstreamOptionsError);
    expect(() => new SandstreamClient({ redis, prefix: 'ns-opt' } as never)).toThrow(
      /SandstreamClient options: prefix: unknown key "prefix" \(did you mean "namespace"\?/,
    );
  });

  it('refuses a misspelt option, suggesting the nearest one', () => {
    expect(() => new SandstreamClient({ redis, namespce: 'x' } as never)).toThrow(
      /unknown key "namespce" \(did you mean "namespace"\?\)/,
    );
    // Gone with cancel as a request the dispatcher owns: refused by name, saying why.
    expect(() => new SandstreamClient({ redis, completionShards: 4 } as never)).toThrow(
      /completionShards: unknown key "completionShards" \(the SDK no longer needs it/,
    );
  });

  it('validates follow, wait and list options the same way', async () => {
    const client = new SandstreamClient({ redis, namespace: 'ns-opt' });
    await expect(client.follow('j', { form: '1-0' } as never).next()).rejects.toThrow(
      /follow options: form: unknown key "form" \(did you mean "from"\?\)/,
    );
    await expect(client.wait('j', { timeout: 5 } as never)).rejects.toThrow(
      /wait options: timeout: unknown key "timeout" \(did you mean "timeoutMs"\?\)/,
    );
    await expect(client.list({ tennant: 'a' } as never)).rejects.toThrow(
      /list options: tennant: unknown key "tennant" \(did you mean "tenant"\?\)/,
    );
  });

  it('talks to the HTTP API given url (and apiKey), never with the Redis options', () => {
    const http = new SandstreamClient({ url: 'http://127.0.0.1:1', apiKey: 'k' });
    expect(http.transportKind).toBe('http');
    expect(new SandstreamClient({ redis }).transportKind).toBe('redis');
    // Over HTTP there is no Redis connection to hand out: said by name, not undefined.
    expect(() => http.redis).toThrow(/client\.redis is only there over Redis/);
    expect(() => new SandstreamClient({ url: 'http://x', namespace: 'ns' })).toThrow(
      /url \(the HTTP API\) does not go with namespace \(Redis\)/,
    );
    expect(() => new SandstreamClient({ url: 'http://x', redis })).toThrow(/does not go with redis/);
    expect(() => new SandstreamClient({ apiKey: 'k' })).toThrow(/apiKey needs url/);
    expect(() => new SandstreamClient({ url: 'redis://x' })).toThrow(
      /url must start with http:\/\/ or https:\/\//,
    );
  });
});
