import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ApiKeyStore, createKeySpace } from '@sandstream/bus';
import { repoRoot, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

// `sandstream apikey …`, the built CLI as a user runs it (npx tsc -b libs/client first).
const namespace = uniqueNamespace('apikey');
const redis = new Redis(testRedisUrl());
const keys = createKeySpace(namespace);

function cli(...args: string[]) {
  const { REDIS_URL: _url, SANDSTREAM_NAMESPACE: _ns, ...rest } = process.env;
  return spawnSync(process.execPath, [join(repoRoot, 'libs/client/dist/cli/main.js'), ...args], {
    env: { ...rest, REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: namespace },
    encoding: 'utf8',
    timeout: 30_000,
  });
}

afterAll(async () => {
  await redis.unlink(keys.apiKeys);
  redis.disconnect();
});

describe('sandstream apikey', () => {
  it('create prints the key alone on stdout; ls lists it without the key; revoke ends it', async () => {
    const created = cli('apikey', 'create', '--tenant', 'acme', '--admin');
    expect(created.status).toBe(0);
    const key = created.stdout.trim();
    expect(created.stdout).toBe(`${key}\n`);
    const info = await new ApiKeyStore({ redis, keys }).verify(key);
    expect(info).toMatchObject({ tenant: 'acme', admin: true });

    const listed = cli('apikey', 'ls', '--json');
    expect(listed.status).toBe(0);
    expect(listed.stdout).not.toContain(key.slice(20));
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id: info?.id, tenant: 'acme' })]);

    expect(cli('apikey', 'revoke', info?.id ?? '').status).toBe(0);
    expect(await new ApiKeyStore({ redis, keys }).verify(key)).toBeNull();
    expect(cli('apikey', 'revoke', info?.id ?? '').status).toBe(4);
  });

  it('refuses a missing or invalid tenant with exit 2', () => {
    const missing = cli('apikey', 'create');
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/--tenant/);
    const invalid = cli('apikey', 'create', '--tenant', 'Not Valid');
    expect(invalid.status).toBe(2);
    expect(invalid.stderr).toMatch(/tenant may contain only/);
  });
});
