import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TemplateFileError } from './load-templates.js';
import { TemplateRegistry, TemplateResolveError } from './template-registry.js';

const good = `
defaults:
  env: { FROM_DEFAULTS: "1", SHARED: defaults }
  resources: { limits: { cpu: "1", memory: 1Gi } }
templates:
  node:
    image: node:20
    env: { SHARED: template, NODE_ENV: test }
    resources: { limits: { memory: 2Gi } }
    runtimeClass: runsc
    podTemplate: { spec: { nodeSelector: { pool: sandbox } } }
`;

let dir: string;
let path: string;
const open: TemplateRegistry[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sandstream-templates-'));
  path = join(dir, 'templates.yaml');
  await writeFile(path, good);
});
afterEach(async () => {
  for (const r of open.splice(0)) r.close();
  await rm(dir, { recursive: true, force: true });
});

async function openRegistry(extra: Partial<Parameters<typeof TemplateRegistry.open>[0]> = {}) {
  const registry = await TemplateRegistry.open({ path, debounceMs: 50, ...extra });
  open.push(registry);
  return registry;
}

/** Waits for the next onReload event. */
function nextReload(events: unknown[], count: number, timeoutMs = 5000): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const check = () => {
      if (events.length >= count) resolve();
      else if (Date.now() - started > timeoutMs) reject(new Error(`no reload within ${timeoutMs} ms`));
      else setTimeout(check, 20);
    };
    check();
  });
}

describe('TemplateRegistry', () => {
  it('resolves request > template > defaults, merging maps key by key', async () => {
    const registry = await openRegistry({ watch: false });
    const spec = registry.resolve({
      template: 'node',
      spec: { env: { SHARED: 'request' }, resources: { limits: { cpu: '2' } } },
    });
    expect(spec.image).toBe('node:20');
    expect(spec.env).toEqual({ FROM_DEFAULTS: '1', SHARED: 'request', NODE_ENV: 'test' });
    expect(spec.resources).toEqual({ limits: { cpu: '2', memory: '2Gi' } });
    expect(spec.runtimeClass).toBe('runsc');
    expect(spec.template).toBe('node');
    expect(spec.podTemplate).toEqual({ spec: { nodeSelector: { pool: 'sandbox' } } });
    // Schema defaults fill what no layer said.
    expect(spec.startDeadlineSeconds).toBe(120);
    expect(spec.network).toBe('default');
  });

  it('resolves a request without a template when it names its own image', async () => {
    const registry = await openRegistry({ watch: false });
    expect(registry.resolve({ spec: { image: 'busybox' } }).env).toEqual({
      FROM_DEFAULTS: '1',
      SHARED: 'defaults',
    });
  });

  it('names the file, the template and the field of an invalid template', async () => {
    await writeFile(
      path,
      `templates:\n  node:\n    image: node:20\n    resources: { limits: { cpu: lots } }\n`,
    );
    const err = await TemplateRegistry.open({ path, watch: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemplateFileError);
    expect((err as Error).message).toMatch(
      /^templates\.yaml: template "node": resources\.limits\.cpu: cpu must be/,
    );
  });

  it('refuses unknown fields (typos) in a template, naming the nearest valid one', async () => {
    await writeFile(path, `templates:\n  node:\n    imgae: node:20\n`);
    await expect(TemplateRegistry.open({ path, watch: false })).rejects.toThrow(
      'templates.yaml: template "node": imgae: unknown key "imgae" (did you mean "image"?)',
    );
  });

  it('refuses unknown fields at every depth of a template, the defaults and the file', async () => {
    await writeFile(
      path,
      [
        'defaultTemplates: node',
        'defaults:',
        '  resources: { limit: { cpu: "1" } }',
        'templates:',
        '  node:',
        '    image: node:20',
        '    workdir: /src',
        '    resources: { limits: { cpus: "1" } }',
        '    secretEnv: { TOKEN: { secretName: s, keys: k } }',
        '    tolerations: [{ key: k, efect: NoSchedule }]',
        '    persistentWorkspace: { name: w, sise: 1Gi }',
        '    podTemplate: { spec: { anything: goes } }',
      ].join('\n'),
    );
    const err = await TemplateRegistry.open({ path, watch: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemplateFileError);
    expect((err as Error).message.split('\n').sort()).toEqual([
      'templates.yaml: defaultTemplates: unknown key "defaultTemplates" (did you mean "defaultTemplate"?)',
      'templates.yaml: defaults.resources.limit: unknown key "limit" (did you mean "limits"?)',
      'templates.yaml: template "node": persistentWorkspace.sise: unknown key "sise" (did you mean "size"?)',
      'templates.yaml: template "node": resources.limits.cpus: unknown key "cpus" (did you mean "cpu"?)',
      // secretEnv also needs its key: the misspelt one is reported, and the missing one.
      'templates.yaml: template "node": secretEnv.TOKEN.key: Invalid input: expected string, received undefined',
      'templates.yaml: template "node": secretEnv.TOKEN.keys: unknown key "keys" (did you mean "key"?)',
      'templates.yaml: template "node": tolerations.0.efect: unknown key "efect" (did you mean "effect"?)',
      'templates.yaml: template "node": workdir: unknown key "workdir" (did you mean "workingDirectory"?)',
    ]);
  });

  it('reports an unknown template and an incomplete result with clear errors', async () => {
    const registry = await openRegistry({ watch: false });
    expect(() => registry.resolve({ template: 'nope' })).toThrow(
      /unknown template "nope"; known templates: node/,
    );
    expect(() => registry.resolve({})).toThrow(TemplateResolveError);
    expect(() => registry.resolve({})).toThrow(/image/);
    expect(() => registry.resolve({ template: 'node', spec: { user: 'root' } as never })).toThrow(
      /request\.spec\.user/,
    );
  });

  it('reloads on change without restart, and keeps the last good version when an edit is invalid', async () => {
    const events: ({ ok: true } | { ok: false; error: Error })[] = [];
    const registry = await openRegistry({ onReload: (e) => events.push(e) });
    expect(registry.resolve({ template: 'node' }).image).toBe('node:20');

    await writeFile(path, good.replace('node:20', 'node:22'));
    await nextReload(events, 1);
    expect(events.at(-1)?.ok).toBe(true);
    expect(registry.resolve({ template: 'node' }).image).toBe('node:22');

    await writeFile(path, `templates:\n  node:\n    image: ""\n`);
    await nextReload(events, 2);
    const bad = events.at(-1);
    expect(bad?.ok).toBe(false);
    expect(bad && !bad.ok && bad.error.message).toMatch(/template "node": image/);
    expect(registry.lastError).toBeDefined();
    expect(registry.resolve({ template: 'node' }).image).toBe('node:22');

    // An editor's save: write elsewhere, rename over the file. The directory watch still sees it.
    const tmp = join(dir, '.templates.yaml.swp');
    await writeFile(tmp, good.replace('node:20', 'node:24'));
    await rename(tmp, path);
    await nextReload(events, 3);
    expect(registry.resolve({ template: 'node' }).image).toBe('node:24');
    expect(registry.lastError).toBeUndefined();
  });

  it('lists warm pools with their member spec, and refuses bad pool settings by field and limit', async () => {
    await writeFile(
      path,
      `templates:\n  node:\n    image: node:20\n    env: { A: "1" }\n    pool: { min: 2, max: 4 }\n    tenants: [acme]\n  plain:\n    image: busybox\n`,
    );
    const registry = await openRegistry({ watch: false });
    expect(registry.pools()).toEqual([
      expect.objectContaining({ name: 'node', min: 2, max: 4, tenants: ['acme'] }),
    ]);
    expect(registry.pools()[0]?.spec).toMatchObject({ image: 'node:20', env: { A: '1' }, template: 'node' });
    // Pool settings are not part of the spec a request resolves to.
    expect(registry.resolve({ template: 'node' })).not.toHaveProperty('pool');

    const refused = async (template: string) => {
      await writeFile(path, `templates:\n  node:\n    image: node:20\n${template}`);
      return (await TemplateRegistry.open({ path, watch: false }).catch((e: Error) => e)) as Error;
    };
    expect((await refused('    pool: { min: 5, max: 4 }\n')).message).toBe(
      'templates.yaml: template "node": pool.min: pool.min must not exceed pool.max',
    );
    expect((await refused('    pool: { min: 1, max: 5000 }\n')).message).toBe(
      'templates.yaml: template "node": pool.max: pool.max must be at most 1000',
    );
    expect((await refused('    pool: { min: 1, maks: 2 }\n')).message).toMatch(
      /pool\.maks: unknown key "maks" \(did you mean "max"\?\)/,
    );
    expect((await refused('    tenants: [acme]\n')).message).toBe(
      'templates.yaml: template "node": tenants: reserves a warm pool for tenants, but the template declares no pool',
    );
  });

  it('accepts the example file shipped in deploy/', async () => {
    const example = fileURLToPath(new URL('../../../../deploy/templates.example.yaml', import.meta.url));
    const registry = await TemplateRegistry.open({ path: example, watch: false });
    expect(registry.names()).toEqual(['debian', 'python', 'busybox', 'node20-locked-down']);
    const locked = registry.resolve({ template: 'node20-locked-down' });
    expect(locked).toMatchObject({ user: '1000:1000', network: 'deny-egress', runtimeClass: 'gvisor' });
    expect(locked.resources.limits).toEqual({ cpu: '1', memory: '1Gi', ephemeralStorage: '10Gi' });
    expect(registry.resolve().image).toBe('sandstream/debian:bookworm');
  });
});
