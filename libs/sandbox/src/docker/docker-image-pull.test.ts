import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  buildUniqueImage,
  deleteNamespaceKeys,
  dockerEngine,
  ImageRegistry,
  pushAndForget,
  testRedisUrl,
} from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CreateProgress, type SandboxRef, SandboxStartError } from '../backend.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { dockerLeftovers, testImages } from '../testing/docker-test-env.js';
import { StepChannel } from '../testing/step-channel.js';
import { DockerBackend } from './docker-backend.js';

// An image that is not on the engine is pulled from its registry, with progress, and the
// registry's "no such image" and "wrong credentials" become errors an operator can act on. Two
// registries started here (Debian's docker-registry): one open, one with basic auth.
const { docker, skip } = await dockerEngine('docker image pull');
const redisUrl = testRedisUrl();
const suffix = randomBytes(4).toString('hex');
const login = { username: 'puller', password: `right-${suffix}` };

describe.skipIf(skip || ImageRegistry.unavailable())(
  'Docker backend: images not on the engine are pulled',
  () => {
    let open: ImageRegistry;
    let locked: ImageRegistry;
    let redis: Redis;
    let blocking: Redis;
    let dir: string;
    const made: SandboxRef[] = [];
    const pushed: string[] = [];

    beforeAll(async () => {
      [open, locked] = await Promise.all([ImageRegistry.start(), ImageRegistry.start({ login })]);
      redis = new Redis(redisUrl);
      blocking = new Redis(redisUrl);
      dir = mkdtempSync(join(tmpdir(), 'sandstream-pull-'));
    }, 60_000);

    afterAll(async () => {
      const backend = backendWith(undefined);
      for (const ref of made) {
        await backend.destroy(ref, { graceMs: 1000 }).catch(() => {});
        await deleteNamespaceKeys(redis, ref.jobId);
      }
      for (const image of pushed)
        await docker
          .getImage(image)
          .remove({ force: true })
          .catch(() => {});
      await Promise.all([open?.stop(), locked?.stop()]);
      redis?.disconnect();
      blocking?.disconnect();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    const backendWith = (registryAuthFile: string | undefined) =>
      new DockerBackend({
        docker,
        redis,
        carrierImage: testImages.carrier,
        defaultNetwork: 'host',
        allowOpenRedis: true,
        defaultGraceMs: 1000,
        ...(registryAuthFile ? { registryAuthFile } : {}),
      });

    /** A credentials file as `docker login` writes it, for the locked registry. */
    const credentialsFile = (password: string) => {
      const file = join(dir, `config-${randomBytes(3).toString('hex')}.json`);
      const auth = Buffer.from(`${login.username}:${password}`).toString('base64');
      writeFileSync(file, JSON.stringify({ auths: { [`http://${locked.host}`]: { auth } } }));
      return file;
    };

    const create = async (backend: DockerBackend, image: string, progress?: CreateProgress[]) => {
      const jobId = `pull-${randomBytes(4).toString('hex')}`;
      const ref = await backend.create({
        jobId,
        tenant: 'pull-tests',
        spec: SandboxSpecSchema.parse({ image }),
        agent: { redisUrl, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
        ...(progress ? { onProgress: (p: CreateProgress) => progress.push(p) } : {}),
      });
      made.push(ref);
      return ref;
    };

    const startFailure = async (backend: DockerBackend, image: string): Promise<SandboxStartError> => {
      const jobId = `pull-${randomBytes(4).toString('hex')}`;
      const err = await backend
        .create({
          jobId,
          tenant: 'pull-tests',
          spec: SandboxSpecSchema.parse({ image }),
          agent: { redisUrl, keyStyle: 'tagged' },
        })
        .then(
          (ref) => {
            made.push(ref);
            throw new Error(`created ${ref.id} from ${image}`);
          },
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(SandboxStartError);
      // Nothing was made for a create that could not get its image.
      expect(await dockerLeftovers(docker, jobId)).toEqual([]);
      return err as SandboxStartError;
    };

    it('pulls a pushed image it does not have, reports the layers coming in, and the sandbox runs from it', async () => {
      const image = `${open.host}/sandstream-test/pulled:${suffix}`;
      buildUniqueImage(image, testImages.busybox);
      pushed.push(image);
      await pushAndForget(docker, image);
      await expect(docker.getImage(image).inspect()).rejects.toMatchObject({ statusCode: 404 });

      const backend = backendWith(undefined);
      const progress: CreateProgress[] = [];
      const ref = await create(backend, image, progress);
      const keys = sandboxKeys(ref.jobId, 'tagged');
      await backend.waitReady(ref, 60_000, {
        isAgentAlive: async () => (await redis.exists(keys.heartbeat)) === 1,
      });

      // On the engine now, and what runs is the pushed image (its own /id).
      await docker.getImage(image).inspect();
      const steps = new StepChannel(redis, blocking, keys);
      const result = await steps.run({
        schemaVersion: SCHEMA_VERSION,
        stepId: 'id',
        kind: 'run',
        command: 'cat',
        args: ['/id'],
      });
      expect(result).toMatchObject({ exitCode: 0, errorMessage: null });
      expect(await steps.stdout('id')).toEqual([image]);

      // Progress: layers named, the unique 3 MB layer's bytes counted, then one final `done`.
      expect(progress.length).toBeGreaterThan(1);
      const last = progress.at(-1) as CreateProgress;
      expect(last).toMatchObject({ phase: 'image-pull', image, done: true });
      expect(last.layers).toBeGreaterThanOrEqual(1);
      expect(last.layersDone).toBe(last.layers);
      expect(progress.filter((p) => p.done)).toHaveLength(1);
      expect(Math.max(...progress.map((p) => p.totalBytes))).toBeGreaterThan(1_000_000);
      expect(progress.some((p) => !p.done && p.downloadedBytes < p.totalBytes)).toBe(true);
    }, 180_000);

    it('a name its registry does not have: image_not_found naming the image', async () => {
      const image = `${open.host}/sandstream-test/never-pushed:${suffix}`;
      const err = await startFailure(backendWith(undefined), image);
      expect(err.reason).toBe('image_not_found');
      expect(err.message).toContain(`image "${image}" does not exist in ${open.host}`);
    }, 60_000);

    describe('a registry with basic auth', () => {
      const image = () => `${locked.host}/sandstream-test/private:${suffix}`;
      beforeAll(async () => {
        buildUniqueImage(image(), testImages.busybox, 100_000);
        pushed.push(image());
        await pushAndForget(docker, image(), login);
      }, 120_000);

      it('no credentials for it: image_pull saying the registry asks for some', async () => {
        const err = await startFailure(backendWith(undefined), image());
        expect(err.reason).toBe('image_pull');
        expect(err.message).toContain(`${locked.host} asks for credentials`);
        expect(err.message).toContain('SANDSTREAM_DOCKER_CONFIG_FILE');
      }, 60_000);

      it('wrong credentials: image_pull saying the registry refused them, without the password', async () => {
        const err = await startFailure(backendWith(credentialsFile('wrong-password')), image());
        expect(err.reason).toBe('image_pull');
        expect(err.message).toContain(`${locked.host} refused the credentials`);
        expect(err.message).not.toContain('wrong-password');
      }, 60_000);

      it('the right credentials from the file: pulled and started', async () => {
        await expect(docker.getImage(image()).inspect()).rejects.toMatchObject({ statusCode: 404 });
        const backend = backendWith(credentialsFile(login.password));
        const ref = await create(backend, image());
        const keys = sandboxKeys(ref.jobId, 'tagged');
        await backend.waitReady(ref, 60_000, {
          isAgentAlive: async () => (await redis.exists(keys.heartbeat)) === 1,
        });
        await docker.getImage(image()).inspect();
      }, 120_000);

      it('a credentials file with an unknown field in an entry is refused, naming the field', async () => {
        const file = join(dir, 'typo.json');
        writeFileSync(file, JSON.stringify({ auths: { [locked.host]: { user: 'x', password: 'y' } } }));
        const err = await startFailure(backendWith(file), `${locked.host}/sandstream-test/other:${suffix}`);
        expect(err.reason).toBe('image_pull');
        expect(err.message).toMatch(/auths.*user/);
      }, 60_000);
    });
  },
);
