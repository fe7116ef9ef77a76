import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FollowItem } from '@sandstream/client';
import {
  buildUniqueImage,
  dockerEngine,
  findCarrierImage,
  ImageRegistry,
  pushAndForget,
} from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Through the services: a sandbox naming an image only a registry has is created by pulling it,
// and the pull's progress is on the create's timeline beside its state changes. The registry
// wants a login; pod-lifecycle has it in its own credentials file (never in Redis or the spec).
const { docker, skip } = await dockerEngine('image pull e2e');
const carrier = findCarrierImage();
const base = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
const suffix = randomBytes(4).toString('hex');
const login = { username: 'stack', password: `pw-${suffix}` };

describe.skipIf(skip || ImageRegistry.unavailable() || (!carrier && process.env.CI !== 'true'))(
  'image pull through the services',
  () => {
    let registry: ImageRegistry;
    let stack: Stack;
    let dir: string;
    let image: string;

    beforeAll(async () => {
      registry = await ImageRegistry.start({ login });
      image = `${registry.host}/sandstream-test/stack-pull:${suffix}`;
      buildUniqueImage(image, base, 2_000_000);
      await pushAndForget(docker, image, login);
      dir = mkdtempSync(join(tmpdir(), 'sandstream-pull-e2e-'));
      const credentials = join(dir, 'config.json');
      const auth = Buffer.from(`${login.username}:${login.password}`).toString('base64');
      writeFileSync(credentials, JSON.stringify({ auths: { [registry.host]: { auth } } }));
      stack = await startStack({
        label: 'pull',
        env: {
          SANDBOX_TYPE: 'docker',
          SANDSTREAM_DOCKER_NETWORK: 'host',
          SANDSTREAM_ALLOW_OPEN_REDIS: '1',
          SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
          SANDSTREAM_DOCKER_CONFIG_FILE: credentials,
        },
      });
    }, 180_000);

    afterAll(async () => {
      await stack?.stop();
      if (image)
        await docker
          .getImage(image)
          .remove({ force: true })
          .catch(() => {});
      await registry?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 120_000);

    /** The sandbox's timeline from its start until it runs (or ends). */
    const timelineUntilRunning = async (id: string): Promise<FollowItem[]> => {
      const items: FollowItem[] = [];
      const controller = new AbortController();
      for await (const item of stack.client.follow(id, { signal: controller.signal })) {
        items.push(item);
        if (item.type === 'state' && (item.to === 'running' || item.terminal)) break;
      }
      controller.abort();
      return items;
    };

    it('creates a sandbox from an image it pulls, with the pull on the timeline before running', async () => {
      await expect(docker.getImage(image).inspect()).rejects.toMatchObject({ statusCode: 404 });
      const id = `${stack.namespace}-pulled`;
      await using sandbox = await stack.client.sandboxes.create({ id, image }, { timeoutSeconds: 120 });
      expect((await sandbox.exec(['cat', '/id'])).stdout).toBe(`${image}\n`);

      const items = await timelineUntilRunning(id);
      const progress = items.filter((i) => i.type === 'progress');
      expect(progress.length, JSON.stringify(items)).toBeGreaterThanOrEqual(2);
      const last = progress.at(-1);
      expect(last).toMatchObject({ progress: { phase: 'image-pull', image, done: true } });
      expect(last?.type === 'progress' && last.message).toMatch(
        /^pulled image .* \(\d+ layers, \d+\.\d MB\)$/,
      );
      // Between `starting` and `running`, in that order.
      const kinds = items.map((i) => (i.type === 'state' ? `state:${i.to}` : i.type));
      const firstProgress = kinds.indexOf('progress');
      expect(firstProgress).toBeGreaterThan(kinds.indexOf('state:starting'));
      expect(kinds.lastIndexOf('progress')).toBeLessThan(kinds.indexOf('state:running'));
    }, 180_000);

    it('a name the registry does not have: the create fails saying so', async () => {
      const missing = `${registry.host}/sandstream-test/never-pushed:${suffix}`;
      const id = `${stack.namespace}-missing`;
      await expect(
        stack.client.sandboxes.create({ id, image: missing }, { timeoutSeconds: 60 }),
      ).rejects.toThrow(
        new RegExp(`image_not_found.*${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" does not exist`),
      );
    }, 120_000);
  },
);
