import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseTemplates } from '../libs/sandbox/src/templates/load-templates.js';
import { type KubeObject, parseKubeObjects, validateKubeObject } from './helpers/kubernetes-schemas.js';

/*
 * deploy/k8s is a kustomize base with two overlays. Each overlay is rendered by the real
 * `kubectl kustomize` (Debian's kubernetes-client) in a scratch copy of deploy/k8s whose Secrets'
 * files come from make-secrets.sh, and every rendered object is validated against the
 * Kubernetes schemas, as kubernetes-manifests.test.ts validates the base's files.
 */
const k8sDir = fileURLToPath(new URL('../deploy/k8s/', import.meta.url));
const OVERLAYS = ['dev', 'production'] as const;
const SERVICES = ['api', 'scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper'] as const;

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
// CI installs kubernetes-client (scripts/test.mjs); elsewhere a machine without it skips.
const run = hasKubectl || process.env.CI === 'true';

const scratch = mkdtempSync(join(tmpdir(), 'sandstream-kustomize-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A copy of deploy/k8s without any real Secrets' files, made once per test file. */
function scratchCopy(): string {
  const copy = join(scratch, 'k8s');
  cpSync(k8sDir, copy, { recursive: true, filter: (src) => !/\/overlays\/[^/]+\/secrets(\/|$)/.test(src) });
  return copy;
}

function sh(command: string, args: string[]) {
  const res = spawnSync(command, args, { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${res.status}): ${res.stderr}`);
  return res.stdout;
}

/**
 * kustomize folds a long base64 value over several lines of a YAML block scalar. The API server
 * decodes it all the same (Go's base64 skips line breaks); the schema's "byte" format does not, so
 * the breaks are taken out before validating.
 */
function unfoldSecretData(object: KubeObject): void {
  if (object.kind !== 'Secret' || !object.data) return;
  const data = object.data as Record<string, string>;
  for (const key of Object.keys(data)) data[key] = data[key]!.replace(/\s+/g, '');
}

const rendered = new Map<string, KubeObject[]>();
function render(overlay: (typeof OVERLAYS)[number]): KubeObject[] {
  const cached = rendered.get(overlay);
  if (cached) return cached;
  const copy = rendered.size === 0 ? scratchCopy() : join(scratch, 'k8s');
  sh('bash', [join(copy, 'make-secrets.sh'), join(copy, 'overlays', overlay)]);
  const objects = parseKubeObjects(sh('kubectl', ['kustomize', join(copy, 'overlays', overlay)]), overlay);
  for (const object of objects) unfoldSecretData(object);
  rendered.set(overlay, objects);
  return objects;
}

const named = (objects: KubeObject[], kind: string, name: string) => {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  expect(found, `${kind}/${name}`).toHaveLength(1);
  return found[0]!;
};
const deployment = (objects: KubeObject[], name: string) =>
  new Deployment(named(objects, 'Deployment', name) as never);
const container = (objects: KubeObject[], name: string) =>
  deployment(objects, name).spec!.template.spec!.containers[0]!;
const envValue = (objects: KubeObject[], service: string, variable: string) =>
  container(objects, service).env?.find((e) => e.name === variable);
/** Generated objects carry a content hash: `sandstream-redis-<hash>`. */
const generated = (objects: KubeObject[], kind: string, prefix: string) =>
  objects.filter((o) => o.kind === kind && new RegExp(`^${prefix}-[a-z0-9]{10}$`).test(o.metadata.name));
const secretText = (secret: KubeObject, key: string) =>
  Buffer.from((secret.data as Record<string, string>)[key]!, 'base64').toString('utf8');

describe.skipIf(!run)('deploy/k8s overlays rendered by kubectl kustomize', () => {
  it('the base lists every manifest file it holds', () => {
    const base = parseYaml(readFileSync(join(k8sDir, 'base', 'kustomization.yaml'), 'utf8')) as {
      resources: string[];
    };
    const files = readdirSync(join(k8sDir, 'base')).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
    );
    expect([...base.resources].sort()).toEqual(files.sort());
  });

  it.each(OVERLAYS)('%s: every rendered object is valid against the Kubernetes schemas', (overlay) => {
    const objects = render(overlay);
    const kinds = new Set(objects.map((o) => o.kind));
    for (const kind of [
      'Namespace',
      'Deployment',
      'StatefulSet',
      'Secret',
      'ConfigMap',
      'PodDisruptionBudget',
    ])
      expect(kinds, overlay).toContain(kind);
    for (const object of objects)
      expect(() => validateKubeObject(object), `${object.kind}/${object.metadata.name}`).not.toThrow();
    // Everything lands in the namespace the sandboxes' owner references need (one namespace).
    for (const object of objects.filter((o) => o.kind !== 'Namespace'))
      expect(object.metadata.namespace, `${object.kind}/${object.metadata.name}`).toBe('sandstream');
  });

  it.each(OVERLAYS)('%s: every Secret and ConfigMap a pod names is in the output', (overlay) => {
    const objects = render(overlay);
    const present = new Set(objects.map((o) => `${o.kind}/${o.metadata.name}`));
    const referenced: string[] = [];
    // secretKeyRef / configMapKeyRef in env, secret / configMap volumes, projected sources.
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) {
        for (const item of node) walk(item);
        return;
      }
      if (!node || typeof node !== 'object') return;
      for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
        const ref = value as { name?: string; secretName?: string };
        if (key === 'secretKeyRef') referenced.push(`Secret/${ref.name}`);
        if (key === 'configMapKeyRef' || key === 'configMap') referenced.push(`ConfigMap/${ref.name}`);
        if (key === 'secret') referenced.push(`Secret/${ref.secretName}`);
        walk(value);
      }
    };
    for (const object of objects.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet'))
      walk((object.spec as { template: unknown }).template);
    expect(referenced.length).toBeGreaterThan(10);
    for (const ref of referenced) expect(present, ref).toContain(ref);
    // The generated ones by their hashed names: the overlay, not the base, supplies them.
    for (const prefix of ['sandstream-redis', 'sandstream-nats', 'sandstream-api'])
      expect(generated(objects, 'Secret', prefix), prefix).toHaveLength(1);
    expect(generated(objects, 'ConfigMap', 'sandstream-templates')).toHaveLength(1);
  });

  it.each(OVERLAYS)(
    '%s: Redis gets an ACL file without the default user, and the services its admin URL',
    (overlay) => {
      const objects = render(overlay);
      const [secret] = generated(objects, 'Secret', 'sandstream-redis');
      const acl = secretText(secret!, 'users.acl');
      // Off, yet with its permissions: Redis 7 replays its append-only file's transactions as `default`.
      expect(acl).toMatch(/^user default off ~\* &\* \+@all$/m);
      const password = /^user admin on >([0-9a-f]{48}) /m.exec(acl)?.[1];
      expect(password).toBeDefined();
      const url = new URL(secretText(secret!, 'url'));
      expect(url.username).toBe('admin');
      expect(url.password).toBe(password);
      expect(url.hostname).toBe('redis.sandstream.svc.cluster.local');
      const redis = new StatefulSet(named(objects, 'StatefulSet', 'redis') as never);
      const acls = redis.spec!.template.spec!.volumes!.find((v) => v.name === 'acl');
      expect(acls?.secret?.secretName).toBe(secret!.metadata.name);
      const [nats] = generated(objects, 'Secret', 'sandstream-nats');
      expect(secretText(nats!, 'url')).toContain(`:${secretText(nats!, 'password')}@nats.sandstream.svc`);
      expect(secretText(generated(objects, 'Secret', 'sandstream-api')[0]!, 'admin-key')).toMatch(
        /^sk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/,
      );
    },
  );

  it.each(OVERLAYS)(
    '%s: the templates-and-pools ConfigMap is a valid templates file, read by scheduler, api and pod-lifecycle',
    (overlay) => {
      const objects = render(overlay);
      const [configMap] = generated(objects, 'ConfigMap', 'sandstream-templates');
      const text = (configMap!.data as Record<string, string>)['templates.yaml']!;
      const file = parseTemplates(text, `${overlay}/templates.yaml`);
      expect(Object.keys(file.templates).length).toBeGreaterThan(0);
      for (const service of ['scheduler', 'api', 'pod-lifecycle']) {
        expect(envValue(objects, service, 'SANDSTREAM_TEMPLATES_FILE')?.value, service).toBe(
          '/etc/sandstream/templates.yaml',
        );
        expect(JSON.stringify(deployment(objects, service).spec!.template.spec!.volumes), service).toContain(
          `"${configMap!.metadata.name}"`,
        );
      }
    },
  );

  it.each(OVERLAYS)(
    '%s: the sandbox floor still selects every sandbox (no overlay label narrows it)',
    (overlay) => {
      const floor = new NetworkPolicy(
        named(render(overlay), 'NetworkPolicy', 'sandstream-sandbox-floor') as never,
      );
      expect(floor.spec!.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/managed-by': 'sandstream' });
    },
  );

  it('dev: one replica each, the local images, anonymous access from loopback', () => {
    const objects = render('dev');
    for (const name of SERVICES) {
      expect(deployment(objects, name).spec!.replicas, name).toBe(1);
      expect(container(objects, name).image, name).toBe('sandstream/services:dev');
    }
    expect(envValue(objects, 'pod-lifecycle', 'SANDSTREAM_AGENT_CARRIER_IMAGE')?.value).toBe(
      'sandstream/agent-carrier:dev',
    );
    expect(envValue(objects, 'api', 'API_ANONYMOUS')?.value).toBe('loopback');
    for (const name of ['redis', 'nats']) {
      const set = new StatefulSet(named(objects, 'StatefulSet', name) as never);
      expect(set.spec!.template.spec!.containers[0]!.image, name).toBe('sandstream/datastores:bookworm');
    }
  });

  it('production: several replicas behind the api PDB, larger requests, no anonymous access', () => {
    const objects = render('production');
    for (const name of SERVICES) {
      expect(deployment(objects, name).spec!.replicas, name).toBeGreaterThanOrEqual(2);
      expect(container(objects, name).image, name).toBe('sandstream/services:1.0.0');
      expect(container(objects, name).resources?.requests?.cpu, name).toBe('250m');
    }
    expect(deployment(objects, 'api').spec!.replicas).toBe(3);
    expect(envValue(objects, 'api', 'API_ANONYMOUS')?.value).toBe('off');
    // Each env variable once: a patch that appended instead of merging would leave two.
    const names = container(objects, 'api').env!.map((e) => e.name);
    expect(new Set(names).size).toBe(names.length);
    const pdb = new PodDisruptionBudget(named(objects, 'PodDisruptionBudget', 'api') as never);
    expect(pdb.spec!.selector!.matchLabels).toEqual({ 'app.kubernetes.io/name': 'api' });
    const api = container(objects, 'api');
    expect(api.readinessProbe?.httpGet?.path).toBe('/readyz');
  });

  it('make-secrets.sh keeps what exists: a second run rotates no password', () => {
    const before = render('dev');
    const copy = join(scratch, 'k8s');
    sh('bash', [join(copy, 'make-secrets.sh'), join(copy, 'overlays', 'dev')]);
    const again = parseKubeObjects(sh('kubectl', ['kustomize', join(copy, 'overlays', 'dev')]), 'dev');
    for (const object of again) unfoldSecretData(object);
    const secrets = (objects: KubeObject[]) => objects.filter((o) => o.kind === 'Secret');
    expect(secrets(again)).toEqual(secrets(before));
  });
});
