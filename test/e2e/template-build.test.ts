import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BuiltTemplates } from '@sandstream/bus';
import { dockerEngine, findCarrierImage, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-run.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// `sandstream template build` builds with the engine and registers the template in Redis; the
// scheduler resolves it there (no templates file in this stack at all), and a sandbox of it runs
// the built image.
const { docker, skip } = await dockerEngine('template build e2e');
const carrier = findCarrierImage();
const base = process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm';

describe.skipIf(skip || (!carrier && process.env.CI !== 'true'))('sandstream template build', () => {
  let stack: Stack;
  let dir: string;
  const images: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandstream-template-e2e-'));
    stack = await startStack({
      label: 'tmpl',
      env: {
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
      },
    });
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    for (const image of images)
      await docker
        .getImage(image)
        .remove({ force: true })
        .catch(() => {});
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  const cli = (args: string[]) =>
    runCli(args, { REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: stack.namespace });

  it('builds from a Dockerfile outside the directory, registers it, and a sandbox of it runs the image', async () => {
    const name = `hello-${stack.namespace.slice(-6)}`;
    const context = join(dir, 'context');
    const marker = `built for ${stack.namespace}`;
    rmSync(context, { recursive: true, force: true });
    mkdirSync(context, { recursive: true });
    writeFileSync(join(context, 'hello.txt'), `${marker}\n`);
    writeFileSync(
      join(dir, 'template.Dockerfile'),
      [
        `FROM ${base}`,
        'COPY hello.txt /etc/hello-from-template',
        'RUN git --version > /etc/git-version',
      ].join('\n'),
    );
    const built = await cli(['template', 'build', name, '-f', join(dir, 'template.Dockerfile'), context]);
    expect(built.status, built.stderr).toBe(0);
    const image = built.stdout.trim();
    images.push(image);
    expect(image).toMatch(new RegExp(`^sandstream-template/${name}:[0-9a-f]{12}$`));
    expect(built.stderr).toContain(`registered template ${name}`);
    expect(await new BuiltTemplates(stack.redis, stack.client.keys).get(name)).toMatchObject({ name, image });

    const listed = await cli(['template', 'ls', '--json']);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ name, image })]);

    await using sandbox = await stack.client.sandboxes.create({ id: `${stack.namespace}-t`, template: name });
    expect((await sandbox.exec(['cat', '/etc/hello-from-template'])).stdout).toBe(`${marker}\n`);
    expect((await sandbox.exec(['cat', '/etc/git-version'])).stdout).toMatch(/^git version /);
    const record = await stack.client.sandboxes.get(`${stack.namespace}-t`);
    expect(record?.spec).toMatchObject({ template: name });
  }, 300_000);

  it('refuses a bad name and a missing Dockerfile before building anything', async () => {
    const bad = await cli(['template', 'build', 'Bad Name', dir]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/template name "Bad Name": a template name is 1-63 characters/);
    const missing = await cli(['template', 'build', 'ok', '-f', join(dir, 'nope.Dockerfile'), dir]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/Dockerfile .*nope.Dockerfile is not a file/);
  }, 60_000);

  it('a template that is neither in a file nor built fails the create naming both', async () => {
    await expect(
      stack.client.sandboxes.create(
        { id: `${stack.namespace}-none`, template: 'never-built' },
        { timeoutSeconds: 60 },
      ),
    ).rejects.toThrow(/never-built.*no built template/);
  }, 120_000);
});
