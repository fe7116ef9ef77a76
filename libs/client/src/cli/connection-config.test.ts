import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  findLocalFile,
  LOCAL_FILE,
  redactUrl,
  resolveApiConnection,
  resolveConnection,
} from './connection-config.js';

const root = mkdtempSync(join(tmpdir(), 'conn-'));
const nested = join(root, 'a', 'b');
mkdirSync(nested, { recursive: true });
mkdirSync(join(root, '.cache', 'sandstream'), { recursive: true });
const local = join(root, LOCAL_FILE);
const fileUrl = 'redis://admin:s3cret@127.0.0.1:40123';
writeFileSync(local, JSON.stringify({ redisUrl: fileUrl, namespace: 'from-file', pid: 4242 }), {
  mode: 0o600,
});
const elsewhere = mkdtempSync(join(tmpdir(), 'conn-none-'));

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(elsewhere, { recursive: true, force: true });
});

const none = { redisUrl: undefined, namespace: undefined };

describe('resolveConnection', () => {
  it("finds npm start's local.json walking up from any directory below the repo", () => {
    expect(findLocalFile([nested])).toBe(local);
    expect(findLocalFile([elsewhere, nested])).toBe(local);
    expect(resolveConnection({ flags: none, env: {}, searchFrom: [nested] })).toEqual({
      redisUrl: fileUrl,
      namespace: 'from-file',
      urlFile: local,
    });
  });

  it('puts flags before the environment before the file before the defaults', () => {
    const env = { REDIS_URL: 'redis://env:6379', SANDSTREAM_NAMESPACE: 'env-ns' };
    const flags = { redisUrl: 'redis://flag:6379', namespace: 'flag-ns' };
    expect(resolveConnection({ flags, env, searchFrom: [nested] })).toEqual({
      redisUrl: 'redis://flag:6379',
      namespace: 'flag-ns',
    });
    expect(resolveConnection({ flags: none, env, searchFrom: [nested] })).toEqual({
      redisUrl: 'redis://env:6379',
      namespace: 'env-ns',
    });
    expect(
      resolveConnection({
        flags: none,
        env: { SANDSTREAM_NAMESPACE: 'env-ns', REDIS_URL: '' },
        searchFrom: [nested],
      }),
    ).toMatchObject({ redisUrl: fileUrl, namespace: 'env-ns' });
    expect(resolveConnection({ flags: none, env: {}, searchFrom: [elsewhere] })).toEqual({
      redisUrl: 'redis://127.0.0.1:6379',
      namespace: 'sandstream',
    });
  });

  it('says in one line why an unusable file is ignored, and falls back to the defaults', () => {
    const bad = mkdtempSync(join(tmpdir(), 'conn-bad-'));
    const file = join(bad, LOCAL_FILE);
    mkdirSync(join(bad, '.cache', 'sandstream'), { recursive: true });
    try {
      writeFileSync(file, JSON.stringify({ redisUrl: 'http://x', namespace: 'n', pid: 1 }));
      const invalid = resolveConnection({ flags: none, env: {}, searchFrom: [bad] });
      expect(invalid).toMatchObject({ redisUrl: 'redis://127.0.0.1:6379', namespace: 'sandstream' });
      expect(invalid.warning).toBe(
        `ignoring ${file}: redisUrl: redisUrl must start with redis:// or rediss://`,
      );
      writeFileSync(file, '{"redisUrl": ');
      expect(resolveConnection({ flags: none, env: {}, searchFrom: [bad] }).warning).toMatch(
        new RegExp(`^ignoring ${file}: .*JSON`),
      );
      if (process.getuid?.() !== 0) {
        chmodSync(file, 0);
        expect(resolveConnection({ flags: none, env: {}, searchFrom: [bad] }).warning).toMatch(/EACCES/);
      }
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });

  it("finds the log archive's NATS by flag, then variable, then npm start's file with its own Redis only", () => {
    const withNats = mkdtempSync(join(tmpdir(), 'conn-nats-'));
    mkdirSync(join(withNats, '.cache', 'sandstream'), { recursive: true });
    writeFileSync(
      join(withNats, LOCAL_FILE),
      JSON.stringify({ redisUrl: fileUrl, namespace: 'n', pid: 1, natsUrl: 'nats://127.0.0.1:40124' }),
    );
    try {
      const resolve = (flags: { natsUrl?: string; redisUrl?: string }, env: NodeJS.ProcessEnv = {}) =>
        resolveConnection({ flags: { ...none, ...flags }, env, searchFrom: [withNats] }).natsUrl;
      expect(resolve({})).toBe('nats://127.0.0.1:40124');
      expect(resolve({}, { NATS_URL: 'nats://env:4222' })).toBe('nats://env:4222');
      expect(resolve({ natsUrl: 'nats://flag:4222' }, { NATS_URL: 'nats://env:4222' })).toBe(
        'nats://flag:4222',
      );
      // Another installation's Redis: the local archive is not its archive.
      expect(resolve({ redisUrl: 'redis://elsewhere:6379' })).toBeUndefined();
      expect(resolve({ redisUrl: 'redis://elsewhere:6379' }, { NATS_URL: 'nats://env:4222' })).toBe(
        'nats://env:4222',
      );
      // The file without natsUrl (npm start before the archive) still serves its Redis.
      expect(resolveConnection({ flags: none, env: {}, searchFrom: [nested] }).natsUrl).toBeUndefined();
    } finally {
      rmSync(withNats, { recursive: true, force: true });
    }
  });

  it('masks the password in URLs it shows', () => {
    expect(redactUrl(fileUrl)).toBe('redis://admin:***@127.0.0.1:40123');
    expect(redactUrl('redis://127.0.0.1:6399')).toBe('redis://127.0.0.1:6399');
  });

  it('talks to the HTTP API given --url or $SANDSTREAM_URL, with its key; never mixed with Redis flags', () => {
    expect(resolveApiConnection({ flags: {}, env: {} })).toBeUndefined();
    expect(
      resolveApiConnection({ flags: {}, env: { SANDSTREAM_URL: 'http://a:8080', SANDSTREAM_API_KEY: 'k1' } }),
    ).toEqual({ url: 'http://a:8080', apiKey: 'k1' });
    // A flag wins over the variable; an empty variable counts as unset.
    expect(
      resolveApiConnection({
        flags: { url: 'https://b', apiKey: 'k2' },
        env: { SANDSTREAM_URL: 'http://a', SANDSTREAM_API_KEY: '' },
      }),
    ).toEqual({ url: 'https://b', apiKey: 'k2' });
    // $REDIS_URL in the environment does not get in the way; a Redis flag does, by name.
    expect(resolveApiConnection({ flags: { url: 'http://a' }, env: { REDIS_URL: 'redis://x' } })).toEqual({
      url: 'http://a',
    });
    expect(() => resolveApiConnection({ flags: { url: 'http://a', namespace: 'n' }, env: {} })).toThrow(
      /--url \(the HTTP API\) does not go with --namespace/,
    );
    expect(() => resolveApiConnection({ flags: { url: 'redis://a' }, env: {} })).toThrow(/not an http/);
    expect(() => resolveApiConnection({ flags: { apiKey: 'k' }, env: {} })).toThrow(/--api-key needs --url/);
  });
});
