import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { freePort, pollUntil, repoRoot, runOrThrow } from '@sandstream/test-support';

/** The services of docker-compose.yml, each with the variable naming its metrics port on the host. */
export const COMPOSE_SERVICES = {
  api: 'SANDSTREAM_API_METRICS_PORT',
  scheduler: 'SANDSTREAM_SCHEDULER_METRICS_PORT',
  'pod-lifecycle': 'SANDSTREAM_POD_LIFECYCLE_METRICS_PORT',
  'step-dispatcher': 'SANDSTREAM_STEP_DISPATCHER_METRICS_PORT',
  reaper: 'SANDSTREAM_REAPER_METRICS_PORT',
} as const;
export type ComposeService = keyof typeof COMPOSE_SERVICES;

/** What a stack leaves on the engine: it must all be gone after down(). */
export interface ComposeLeftovers {
  containers: string[];
  networks: string[];
  volumes: string[];
  /** Sandbox containers and their volumes, found by the installation label pod-lifecycle sets. */
  sandboxes: string[];
  sandboxVolumes: string[];
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  const res = spawnSync(command, args, { cwd: repoRoot, env, encoding: 'utf8' });
  if (res.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${res.status ?? res.signal}):\n${res.stderr}`);
  return res.stdout;
}

const lines = (text: string) => text.split('\n').filter(Boolean);

/**
 * A 172.30.x.0/24 that neither a Docker network nor a host route uses: the compose file's default
 * (172.30.99.0/24) would collide with a stack already up, or a parallel test's.
 */
function freeSubnetPrefix(): string {
  const used = new Set<string>();
  const ids = lines(run('docker', ['network', 'ls', '-q']));
  if (ids.length > 0)
    for (const subnet of lines(
      run('docker', ['network', 'inspect', '-f', '{{range .IPAM.Config}}{{.Subnet}} {{end}}', ...ids]),
    ).flatMap((l) => l.split(' ')))
      used.add(subnet.split('.').slice(0, 3).join('.'));
  for (const route of lines(run('ip', ['-4', 'route', 'show'])))
    used.add(route.split('.').slice(0, 3).join('.'));
  for (let tries = 0; tries < 200; tries++) {
    const prefix = `172.30.${1 + (randomBytes(1)[0]! % 254)}`;
    if (!used.has(prefix)) return prefix;
  }
  throw new Error('no free 172.30.x.0/24 for the compose stack sandbox network');
}

/**
 * docker-compose.yml brought up under a project name of its own, with its own host ports,
 * installation id and sandbox network, so it runs beside anything else on the engine (the shared
 * test Redis on 6379 included) and down() can tell exactly what was its own.
 */
export class ComposeStack {
  readonly project = `ss${randomBytes(4).toString('hex')}`;
  readonly password = randomBytes(18).toString('hex');
  readonly sandboxNetwork = `${this.project}-sandboxes`;
  /** The stack's first admin key: the api registers it at start (API_ADMIN_KEY), as a deployment's secret. */
  readonly adminKey = `sk_${randomBytes(8).toString('hex')}_${randomBytes(32).toString('base64url')}`;
  private env: NodeJS.ProcessEnv = {};
  private ports: Record<string, number> = {};

  /** The sandbox network's first three octets: a /24 no network on the engine uses yet. */
  readonly subnetPrefix = freeSubnetPrefix();

  private constructor(readonly services: ComposeService[]) {}

  /** Redis's fixed address on the sandbox network (what every sandbox's rules allow). */
  get redisAddress(): string {
    return `${this.subnetPrefix}.2`;
  }

  static async create(options: { carrierImage: string }): Promise<ComposeStack> {
    const stack = new ComposeStack(Object.keys(COMPOSE_SERVICES) as ComposeService[]);
    const portVars = [
      'SANDSTREAM_REDIS_PORT',
      'SANDSTREAM_NATS_PORT',
      'SANDSTREAM_NATS_MONITOR_PORT',
      'SANDSTREAM_API_PORT',
      // pod-lifecycle runs on the host's network: its health port is a host port too.
      'SANDSTREAM_POD_LIFECYCLE_HEALTH_PORT',
      ...Object.values(COMPOSE_SERVICES),
    ];
    for (const name of portVars) stack.ports[name] = 0;
    await stack.pickPorts();
    stack.env = {
      ...process.env,
      ...stack.portsEnv(),
      SANDSTREAM_REDIS_PASSWORD: stack.password,
      API_ADMIN_KEY: stack.adminKey,
      SANDSTREAM_DOCKER_GID: String(statSync('/var/run/docker.sock').gid),
      SANDSTREAM_INSTALLATION: stack.project,
      SANDSTREAM_SANDBOX_NETWORK: stack.sandboxNetwork,
      SANDSTREAM_SANDBOX_SUBNET: `${stack.subnetPrefix}.0/24`,
      SANDSTREAM_SANDBOX_REDIS_ADDRESS: stack.redisAddress,
      SANDSTREAM_SANDBOX_JAEGER_ADDRESS: `${stack.subnetPrefix}.3`,
      SANDSTREAM_AGENT_CARRIER_IMAGE: options.carrierImage,
      // A volume per sandbox, removed with it: the shared cached agent volume would outlive the stack.
      SANDSTREAM_DOCKER_AGENT_VOLUME: 'per-job',
      LOG_LEVEL: 'warn',
    };
    return stack;
  }

  /** A free host port for each of the stack's port variables. */
  private async pickPorts(): Promise<void> {
    for (const name of Object.keys(this.ports)) this.ports[name] = await freePort();
  }

  private portsEnv(): Record<string, string> {
    return Object.fromEntries(Object.entries(this.ports).map(([k, v]) => [k, String(v)]));
  }

  get redisUrl(): string {
    return `redis://admin:${this.password}@127.0.0.1:${this.ports.SANDSTREAM_REDIS_PORT}`;
  }

  /** The API's base URL on the host. */
  get apiUrl(): string {
    return `http://127.0.0.1:${this.ports.SANDSTREAM_API_PORT}`;
  }

  metricsPort(service: ComposeService): number {
    return this.ports[COMPOSE_SERVICES[service]]!;
  }

  private compose(...args: string[]): string {
    return run(
      'docker-compose',
      ['-p', this.project, '-f', `${repoRoot}docker-compose.yml`, ...args],
      this.env,
    );
  }

  /** compose() for the slow commands (up, down), without blocking the test's worker. */
  private composeAsync(...args: string[]): Promise<string> {
    return runOrThrow(
      'docker-compose',
      ['-p', this.project, '-f', `${repoRoot}docker-compose.yml`, ...args],
      {
        cwd: repoRoot,
        env: this.env,
      },
    );
  }

  /**
   * Starts Redis and NATS, then the services once Redis is healthy (their depends_on), and waits
   * until every container with a health check reports healthy (docker-compose 1 has no --wait).
   */
  async up(timeoutMs = 120_000): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.composeAsync('up', '-d', '--no-build', ...this.services);
        break;
      } catch (err) {
        // A port found free was taken before the engine bound it (parallel tests pick ports
        // too): the half-started project goes down, and it comes up again on other ports.
        if (attempt >= 3 || !/address already in use|port is already allocated/.test((err as Error).message))
          throw err;
        await this.down();
        await this.pickPorts();
        this.env = { ...this.env, ...this.portsEnv() };
      }
    }
    const ids = lines(this.compose('ps', '-q'));
    await pollUntil(
      `${this.project}'s containers healthy`,
      () => {
        // A container without a health check (NATS) counts once it runs.
        const format = '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}';
        const states = lines(run('docker', ['inspect', '-f', format, ...ids]));
        return states.every((s) => s === 'healthy' || s === 'running');
      },
      { timeoutMs, intervalMs: 500 },
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${this.logs()}`);
    });
  }

  /** The stack's logs, for a failing test's message. */
  logs(): string {
    try {
      return this.compose('logs', '--no-color', '--tail', '40');
    } catch (err) {
      return (err as Error).message;
    }
  }

  /** Stops and removes the containers, networks and volumes of the project; idempotent. */
  async down(): Promise<void> {
    await this.composeAsync('down', '--volumes', '--remove-orphans', '--timeout', '10');
  }

  /**
   * Force-removes sandbox containers and volumes of this stack's installation: after a failed
   * run, one can still be starting when the stack goes down, and nothing is left to destroy it.
   */
  purgeSandboxes(): void {
    const { sandboxes, sandboxVolumes } = this.leftovers();
    if (sandboxes.length > 0) run('docker', ['rm', '-f', '-v', ...sandboxes]);
    if (sandboxVolumes.length > 0) run('docker', ['volume', 'rm', '-f', ...sandboxVolumes]);
  }

  /** The container id of one of the stack's services. */
  containerOf(service: string): string {
    return this.compose('ps', '-q', service).trim();
  }

  leftovers(): ComposeLeftovers {
    const label = `label=com.docker.compose.project=${this.project}`;
    const installation = `label=sandstream.dev/installation=${this.project}`;
    return {
      containers: lines(run('docker', ['ps', '-aq', '--filter', label])),
      networks: lines(run('docker', ['network', 'ls', '-q', '--filter', label])).concat(
        lines(run('docker', ['network', 'ls', '-q', '--filter', `name=^${this.sandboxNetwork}$`])),
      ),
      volumes: lines(run('docker', ['volume', 'ls', '-q', '--filter', label])),
      sandboxes: lines(run('docker', ['ps', '-aq', '--filter', installation])),
      sandboxVolumes: lines(run('docker', ['volume', 'ls', '-q', '--filter', installation])),
    };
  }
}
