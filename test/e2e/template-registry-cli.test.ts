import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BuiltTemplates, createKeySpace } from '@sandstream/bus';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-run.js';

// `template ls` and `template rm` over Redis work on the registry of built templates alone (no
// services, no engine): a namespace of this test's own, its hash deleted afterwards. Over the
// API: test/api/api-templates.test.ts.
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
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ name: 'kept', source: 'built', image }),
    ]);
    const table = await cli(['template', 'ls']);
    expect(table.status, table.stderr).toBe(0);
    const [header, ...rows] = table.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^NAME\s+SOURCE\s+IMAGE\s+CREATED$/);
    expect(rows.map((r) => r.split(/\s+/).slice(0, 3))).toEqual([['kept', 'built', image]]);

    const again = await cli(['template', 'rm', 'gone']);
    expect(again.status).toBe(4);
    expect(again.stderr).toMatch(/no built template named "gone"/);
  }, 60_000);

  it('refuses a missing name, and a build over --url (it registers in Redis itself)', async () => {
    const bare = await cli(['template', 'rm']);
    expect(bare.status).toBe(2);
    expect(bare.stderr).toMatch(/template name/);
    // A directory with a Dockerfile: the inputs are checked first, then the transport.
    const context = mkdtempSync(join(tmpdir(), 'tmplreg-'));
    writeFileSync(join(context, 'Dockerfile'), 'FROM scratch\n');
    const overApi = await cli(['template', 'build', 'kept', context, '--url', 'http://127.0.0.1:9']);
    rmSync(context, { recursive: true, force: true });
    expect(overApi.status).toBe(2);
    expect(overApi.stderr).toMatch(
      /template build registers templates in Redis directly: give --redis-url, not --url/,
    );
  }, 60_000);
});
