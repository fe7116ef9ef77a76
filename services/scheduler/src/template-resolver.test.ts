import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseJobSpec, parseLiveSandboxSpec } from '@sandstream/bus';
import { TemplateRegistry } from '@sandstream/sandbox';
import { afterAll, describe, expect, it } from 'vitest';
import { TemplateResolutionError, TemplateResolver } from './template-resolver.js';

const dir = mkdtempSync(join(tmpdir(), 'sandstream-templates-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('template resolution', () => {
  it("a built template: its image over the file's defaults and default template; the file wins a clash", async () => {
    const path = join(dir, 'built.yaml');
    writeFileSync(
      path,
      [
        'defaultTemplate: base',
        'defaults:',
        '  startDeadlineSeconds: 77',
        'templates:',
        '  base:',
        '    image: sandstream/debian:bookworm',
        '    env: { FROM_DEFAULT: yes }',
        '  shared:',
        '    image: from-the-file:1',
      ].join('\n'),
    );
    const registry = await TemplateRegistry.open({ path, watch: false });
    const built = new Map(
      ['mine', 'shared'].map((name) => [
        name,
        {
          name,
          image: `sandstream-template/${name}:0123456789ab`,
          imageId: `sha256:${'0'.repeat(64)}`,
          builtAt: 1,
        },
      ]),
    );
    const resolver = new TemplateResolver(registry, { get: async (name) => built.get(name) });
    const mine = await resolver.resolve(parseJobSpec({ template: 'mine', steps: [{ command: 'true' }] }));
    expect(mine.template).toBe('mine');
    expect(mine.sandbox).toMatchObject({
      image: 'sandstream-template/mine:0123456789ab',
      env: { FROM_DEFAULT: 'yes' },
      startDeadlineSeconds: 77,
      template: 'mine',
    });
    const shared = await resolver.resolve(parseJobSpec({ template: 'shared', steps: [{ command: 'true' }] }));
    expect(shared.sandbox.image).toBe('from-the-file:1');
    // Without a file: the built image alone.
    const bare = await new TemplateResolver(undefined, { get: async (name) => built.get(name) }).resolve(
      parseJobSpec({ template: 'mine', steps: [{ command: 'true' }] }),
    );
    expect(bare).toEqual({
      sandbox: { image: 'sandstream-template/mine:0123456789ab', template: 'mine' },
      template: 'mine',
    });
  });

  it('layers the job over a named template from the registry file', async () => {
    const path = join(dir, 'templates.yaml');
    writeFileSync(
      path,
      'templates:\n  node20:\n    image: node:20-bookworm\n    env: { NODE_ENV: test, A: from-template }\n    startDeadlineSeconds: 60\n',
    );
    const registry = await TemplateRegistry.open({ path, watch: false });
    const resolver = new TemplateResolver(registry);
    const resolved = await resolver.resolve(
      parseJobSpec({
        template: 'node20',
        env: { A: 'from-job' },
        steps: [{ command: 'node', args: ['-v'] }],
      }),
    );
    expect(resolved.template).toBe('node20');
    expect(resolved.sandbox).toMatchObject({
      image: 'node:20-bookworm',
      env: { NODE_ENV: 'test', A: 'from-job' },
      startDeadlineSeconds: 60,
    });
    const unknown = resolver.resolve(parseJobSpec({ template: 'rust', steps: [{ command: 'cargo' }] }));
    await expect(unknown).rejects.toThrow(TemplateResolutionError);
    await expect(unknown).rejects.toThrow(/unknown template "rust"; known templates: node20/);
  });

  it("grants a request the secrets on its template's or tenant's allow-list, and refuses others by name", async () => {
    const path = join(dir, 'secrets.yaml');
    writeFileSync(
      path,
      [
        'templates:',
        '  ci:',
        '    image: debian',
        '    allowedSecrets: [git-token]',
        'tenants:',
        '  acme:',
        '    allowedSecrets: [npm-token]',
        '',
      ].join('\n'),
    );
    const registry = await TemplateRegistry.open({ path, watch: false });
    const resolver = new TemplateResolver(registry);
    const job = (tenant: string, secretEnv: Record<string, { secretName: string }>) =>
      parseJobSpec({ template: 'ci', tenant, secretEnv, steps: [{ command: 'true' }] });
    const granted = await resolver.resolve(
      job('acme', { GIT: { secretName: 'git-token' }, NPM: { secretName: 'npm-token' } }),
    );
    expect(granted.sandbox.secretEnv).toEqual({
      GIT: { secretName: 'git-token', key: 'value' },
      NPM: { secretName: 'npm-token', key: 'value' },
    });
    // Another tenant has the template's grant only; a service's own variable is no secret name.
    await expect(resolver.resolve(job('other', { NPM: { secretName: 'npm-token' } }))).rejects.toThrow(
      'secretEnv.NPM: secret "npm-token" is not on the allow-list of template "ci" or tenant "other"',
    );
    await expect(resolver.resolve(job('acme', { R: { secretName: 'REDIS_URL' } }))).rejects.toThrow(
      /secretEnv\.R: secret "REDIS_URL" is not on the allow-list/,
    );
    // Without a templates file there is no allow-list: no secret is granted.
    await expect(
      new TemplateResolver().resolve(
        parseJobSpec({
          image: 'x',
          secretEnv: { T: { secretName: 'git-token' } },
          steps: [{ command: 'true' }],
        }),
      ),
    ).rejects.toThrow(/secretEnv needs an operator allow-list/);
  });

  it('passes image jobs through without a registry and refuses template jobs', async () => {
    const resolver = new TemplateResolver();
    const resolved = await resolver.resolve(
      parseJobSpec({ image: 'debian', env: { X: '1' }, steps: [{ command: 'true' }] }),
    );
    expect(resolved.sandbox).toEqual({ image: 'debian', env: { X: '1' } });
    await expect(
      resolver.resolve(parseJobSpec({ template: 't', steps: [{ command: 'true' }] })),
    ).rejects.toThrow(/no built template .* and this scheduler has no templates file/);
  });
});

describe('template resolution: network', () => {
  it('lets a request narrow an internet template to none or an allow-list, never loosen a stricter one', async () => {
    const path = join(dir, 'network.yaml');
    writeFileSync(
      path,
      [
        'templates:',
        '  open:',
        '    image: debian',
        '  closed:',
        '    image: debian',
        '    network: { egress: none }',
        '',
      ].join('\n'),
    );
    const registry = await TemplateRegistry.open({ path, watch: false });
    const resolver = new TemplateResolver(registry);
    const sandbox = (template: string, network: unknown) =>
      resolver.resolve(parseLiveSandboxSpec({ template, ...(network ? { network } : {}) }));
    expect((await sandbox('open', undefined)).sandbox.network).toBe('default');
    expect((await sandbox('open', { egress: { allow: ['10.1.0.0/16'] } })).sandbox.network).toEqual({
      egress: { allow: ['10.1.0.0/16'] },
    });
    expect((await sandbox('open', 'deny-egress')).sandbox.network).toEqual({ egress: 'none' });
    expect((await sandbox('closed', 'default')).sandbox.network).toEqual({ egress: 'none' });
    expect((await sandbox('closed', { egress: 'internet' })).sandbox.network).toEqual({ egress: 'none' });
    await expect(sandbox('closed', { egress: { allow: ['10.1.0.0/16'] } })).rejects.toThrow(
      /template "closed" sets egress none; a request may only narrow it to "none"/,
    );
  });
});
