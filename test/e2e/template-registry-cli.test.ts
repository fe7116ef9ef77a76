import { randomBytes } from 'node:crypto';
import { BuiltTemplates, createKeySpace } from '@sandstream/bus';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-run.js';

// `template ls` and `template rm` work on the registry of built templates in Redis alone (no
// services, no engine): a namespace of this test's own, its hash deleted afterwards.
const namespace = `tmplreg-${randomBytes(4).toString('hex')}`;
const keys = createKeySpace(namespace);
const redis = new Redis(testRedisUrl());

describe('sandstream template ls / rm', () => {
  afterAll(async () => {
    await redis.del(keys.builtTemplates);
    redis.disconnect();
  });

  const cli = (args: string[]) =>
    runCli(args, { REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: namespace });

  it('lists, removes, and says when there is nothing of that name', async () => {
    const templates = new BuiltTemplates(redis, keys);
    const image = 'sandstream-template/kept:0123456789ab';
    await templates.register({
      name: 'kept',
      image,
      imageId: `sha256:${'0'.repeat(64)}`,
      builtAt: Date.now(),
    });
    await templates.register({
      name: 'gone',
      image: 'sandstream-template/gone:0123456789ab',
      imageId: `sha256:${'0'.repeat(64)}`,
      builtAt: Date.now(),
    });

    const removed = await cli(['template', 'rm', 'gone']);
    expect(removed.status, removed.stderr).toBe(0);
    expect(removed.stderr).toContain('removed template gone');
    expect(await templates.get('gone')).toBeUndefined();

    const listed = await cli(['template', 'ls', '--json']);
    expect(listed.status, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ name: 'kept', image })]);

    const again = await cli(['template', 'rm', 'gone']);
    expect(again.status).toBe(4);
    expect(again.stderr).toMatch(/no built template named "gone"/);
  }, 60_000);

  it('refuses a missing name, and --url (the registry lives in Redis)', async () => {
    const bare = await cli(['template', 'rm']);
    expect(bare.status).toBe(2);
    expect(bare.stderr).toMatch(/template name/);
    const overApi = await cli(['template', 'rm', 'kept', '--url', 'http://127.0.0.1:9']);
    expect(overApi.status).toBe(2);
    expect(overApi.stderr).toMatch(
      /template rm registers templates in Redis directly: give --redis-url, not --url/,
    );
  }, 60_000);
});
