import { randomBytes } from 'node:crypto';
import { pollUntil } from '@sandstream/poll';
import {
  type Egress,
  egressOf,
  formatIssues,
  JobIdSchema,
  KeyStyleSchema,
  type SpecNetwork,
  SpecNetworkSchema,
} from '@sandstream/wire';
import type Dockerode from 'dockerode';
import type { Redis } from 'ioredis';
import { agentArgs, agentEnvironment } from '../agent-command.js';
import { waitForAgent } from '../agent-readiness.js';
import { requestAgentShutdown } from '../agent-shutdown.js';
import {
  type CreateSandboxRequest,
  type DestroyOptions,
  type FilesCapture,
  type FilesCopied,
  type FilesRestored,
  type SandboxBackend,
  type SandboxDiskUsage,
  type SandboxInfo,
  SandboxLabels,
  type SandboxRef,
  SandboxStartError,
  type WaitReadyOptions,
} from '../backend.js';
import { describeCrash } from '../log-tail.js';
import { OpenRedisGuard } from '../open-redis.js';
import { memoryToBytes } from '../quantity.js';
import { type ResourcePolicy, withResourcePolicy } from '../resource-policy.js';
import { dockerRuntimeFor, missingDockerRuntimeMessage, type RuntimeNameMap } from '../runtime-class.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { resolveSecretEnv } from '../secret-env.js';
import { type AgentVolumeMode, CachedAgentVolumes, carrierImageId, fillAgentVolume } from './agent-volume.js';
import { toolchainContainerOptions, type WorkMount } from './container-config.js';
import {
  DiskLimitLabel,
  DiskQuotaLabel,
  DockerDiskMeter,
  detectStorageQuota,
  VolumeLimitsLabel,
  volumeLimitsLabel,
} from './docker-disk.js';
import { egressTarget, installEgress, sweepEgress } from './docker-egress.js';
import { ignoreGone, isConflict, isNotFound } from './docker-errors.js';
import { captureDockerFiles, dockerFilesRoute, restoreDockerFiles, thawDockerFiles } from './docker-files.js';
import { containerLogTail } from './docker-logs.js';
import {
  type DockerRole,
  DockerRoleLabel,
  dockerJobNames,
  PersistentLabel,
  persistentVolumeName,
  VolumeNameLabel,
} from './docker-names.js';
import {
  bridgeInfo,
  chooseNetwork,
  DEFAULT_SANDBOX_NETWORK,
  type DenyEgressConfig,
} from './docker-network.js';
import { containerLayout, copyDocker, restoreCopyDocker } from './docker-snapshot.js';
import { EgressProxy } from './egress-proxy.js';
import { randomSandboxMac } from './egress-rules.js';
import { GvisorFileAccess } from './gvisor-file-access.js';
import { type PullLimits, pullImage } from './image-pull.js';
import { IptablesEgressFirewall } from './iptables-firewall.js';
import { localCarrierImage } from './local-carrier-image.js';
import { type RegistryAuth, registryAuthFor } from './registry-credentials.js';
import { giveWorkDirectoryTo, giveWorkVolumeTo } from './work-ownership.js';

export { DEFAULT_CARRIER_IMAGE } from './local-carrier-image.js';

export interface DockerBackendOptions {
  /** A dockerode client; `new Dockerode()` honours DOCKER_HOST. */
  docker: Dockerode;
  /** For the shutdown step and key cleanup on destroy. */
  redis: Redis;
  carrierImage?: string;
  /** Default `cached`: see AgentVolumeMode and docs/benchmarks.md (per-job costs a container run per start). */
  agentVolume?: AgentVolumeMode;
  /**
   * Network for spec.network "default" (DEFAULT_SANDBOX_NETWORK, a managed bridge). `host` lets a
   * step reach every host port: development only.
   */
  defaultNetwork?: string;
  /** The cgroup sandbox containers are created under (Docker's `--cgroup-parent`); the engine's default when unset. */
  cgroupParent?: string;
  /** Redis as reached from the default network; unset, a loopback URL is rewritten to its gateway. */
  sandboxRedisUrl?: string;
  denyEgress?: DenyEgressConfig;
  /**
   * `iptables` (default): every sandbox on a bridge gets its egress rules in the host firewall
   * before it starts (egress-rules.ts), which needs root on the engine's host; `off`: none, so only
   * `internet` (unconfined but for the bridge) and, with denyEgress, `none` can start.
   */
  egress?: 'iptables' | 'off';
  /** The firewall to use (tests); default an IptablesEgressFirewall on this host. */
  firewall?: IptablesEgressFirewall;
  /**
   * Least time between two sweeps of orphaned egress rules (default 30 s). list() sweeps, and the
   * reaper and the disk budget list every few seconds; each sweep runs `iptables -S` twice, and a
   * child process costs tens of ms of CPU from a process this size, while orphans come only from a
   * crash between a destroy's two halves.
   */
  egressSweepIntervalMs?: number;
  /** The egress proxy of domain allow-lists (tests pass one with their own resolver); default one in this process. */
  egressProxy?: EgressProxy;
  /** Create sandboxes even when their Redis lets anyone in as `default` (SANDSTREAM_ALLOW_OPEN_REDIS). */
  allowOpenRedis?: boolean;
  secretSource?: Record<string, string | undefined>;
  idleTimeoutSeconds?: number;
  defaultGraceMs?: number;
  /** Operator defaults and maxima for CPU, memory and pids; default DEFAULT_RESOURCE_POLICY. */
  resourcePolicy?: ResourcePolicy;
  /**
   * A Docker client configuration file (`auths`, as `docker login` writes it) with the
   * credentials of private registries images are pulled from (SANDSTREAM_DOCKER_CONFIG_FILE,
   * mounted as a secret). Read at each pull, so a rotated secret needs no restart.
   */
  registryAuthFile?: string;
  /** Time limits of an image pull (SANDSTREAM_DOCKER_PULL_*_SECONDS); default DEFAULT_PULL_LIMITS. */
  pullLimits?: PullLimits;
  /**
   * spec.runtimeClass → the engine's runtime name, over the defaults (`gvisor` → `runsc`), for an
   * engine that registered a runtime under another name (say runsc with the KVM platform).
   */
  runtimes?: RuntimeNameMap;
}

const managedFilter = `${SandboxLabels.managedBy}=${SandboxLabels.managedByValue}`;

/**
 * One toolchain container per job, shaped like the Kubernetes pod: the carrier fills a volume with
 * the agent (the init container), the unmodified toolchain image mounts it read-only at /shared
 * and runs the agent through its bundled loader, the work tree lives in its own volume. All state
 * is in Docker labels, so any process can list and destroy what another created.
 */
export class DockerBackend implements SandboxBackend {
  readonly kind = 'docker' as const;
  private readonly docker: Dockerode;
  private readonly carrierImage: string;
  private readonly cached: CachedAgentVolumes;
  private readonly openRedis: OpenRedisGuard;
  private readonly meter: DockerDiskMeter;
  private storageQuota: Promise<boolean> | undefined;
  private readonly firewall: IptablesEgressFirewall | undefined;
  /** When list() last swept orphaned egress rules (0: never, so the first list sweeps). */
  private lastEgressSweep = 0;
  private readonly proxy: EgressProxy;
  /** Each sandbox's address the proxy knows it by, to forget it on destroy. */
  private readonly proxySources = new Map<string, string>();
  /**
   * Which containers are gVisor ones whose files go through the container: the engine's runtimes
   * that are runsc, or that this backend's runtime map calls gVisor, read once from `docker info`.
   */
  private readonly gvisor: GvisorFileAccess;

  constructor(private readonly options: DockerBackendOptions) {
    this.docker = options.docker;
    this.openRedis = new OpenRedisGuard({ allowOpenRedis: options.allowOpenRedis, backend: 'docker' });
    this.carrierImage = options.carrierImage ?? localCarrierImage();
    this.meter = new DockerDiskMeter(this.docker);
    this.firewall = options.egress === 'off' ? undefined : (options.firewall ?? new IptablesEgressFirewall());
    this.proxy = options.egressProxy ?? new EgressProxy();
    this.gvisor = new GvisorFileAccess(
      this.docker,
      new Set(['runsc', dockerRuntimeFor('gvisor', options.runtimes)]),
    );
    this.cached = new CachedAgentVolumes(this.docker, {
      [SandboxLabels.managedBy]: SandboxLabels.managedByValue,
      [DockerRoleLabel]: 'agent-cache',
    });
  }

  async create(request: CreateSandboxRequest): Promise<SandboxRef> {
    const jobId = JobIdSchema.safeParse(request.jobId);
    if (!jobId.success) throw new SandboxStartError('backend_error', formatIssues(jobId.error, 'jobId'));
    const parsed = SandboxSpecSchema.safeParse(request.spec);
    if (!parsed.success) throw new SandboxStartError('backend_error', formatIssues(parsed.error, 'spec'));
    const spec = withResourcePolicy(parsed.data, this.options.resourcePolicy);
    let secrets: Record<string, string>;
    try {
      secrets = resolveSecretEnv(spec.secretEnv, this.options.secretSource);
    } catch (err) {
      throw new SandboxStartError('backend_error', (err as Error).message);
    }
    const names = dockerJobNames(request.jobId);

    // Checked before anything is created: a missing image should cost one API call, not a cleanup.
    // The four look-ups are independent; in parallel they cost one round trip of start latency.
    const runtime = spec.runtimeClass
      ? dockerRuntimeFor(spec.runtimeClass, this.options.runtimes)
      : undefined;
    const [existing, , , carrierId, network] = await Promise.all([
      this.jobContainers(request.jobId),
      this.ensureImage(spec.image, request.onProgress),
      spec.runtimeClass && runtime ? this.requireRuntime(spec.runtimeClass, runtime) : undefined,
      carrierImageId(this.docker, this.carrierImage),
      chooseNetwork(this.docker, spec, {
        defaultNetwork: this.options.defaultNetwork ?? DEFAULT_SANDBOX_NETWORK,
        denyEgress: this.options.denyEgress,
        requestRedisUrl: request.agent.redisUrl,
        sandboxRedisUrl: this.options.sandboxRedisUrl,
        enforced: this.firewall !== undefined,
      }),
    ]).catch((err: unknown) => {
      if (err instanceof SandboxStartError) throw err;
      throw new SandboxStartError('backend_error', `Docker engine: ${(err as Error).message}`);
    });
    const agentRedisUrl = network.redisUrl ?? request.agent.redisUrl;
    // Rules are keyed by a MAC chosen here, so they are in place before the container's first packet.
    const egress = egressOf(spec.network) ?? 'none';
    if (this.firewall && !network.bridge && network.networkMode !== 'host') {
      // Never an unconfined sandbox where rules were asked for: a network the rules cannot name.
      throw new SandboxStartError(
        'backend_error',
        `Docker network "${network.networkMode}" is no bridge with an IPv4 subnet, so egress rules cannot be installed for it; use a bridge network (or SANDSTREAM_DOCKER_EGRESS=off for development)`,
      );
    }
    const guarded =
      this.firewall && network.bridge
        ? await egressTarget({
            jobId: request.jobId,
            mac: randomSandboxMac(randomBytes(5)),
            bridge: network.bridge,
            redisUrl: agentRedisUrl,
            collectorUrl: request.agent.agentEnv?.OTEL_EXPORTER_OTLP_ENDPOINT,
            egress,
            proxy: this.proxy,
          })
        : undefined;
    // The very URL the agent will get: that server, reached without credentials, must say NOAUTH.
    await this.openRedis.check(agentRedisUrl);

    if (existing.length > 0) {
      // An earlier attempt of this very create (pod-lifecycle killed mid-start, or Redis down
      // after the container started): replaced, never a failed job. Not adopted: that attempt's
      // agent holds credentials this attempt's Redis user no longer accepts (a new password per
      // attempt). Removed without a shutdown step: its result would land in the new agent's
      // result list. What it left in Redis is the caller's to free (pod-lifecycle's start frees
      // the footprint of an attempt it resumes, libs/bus sandbox-footprint.ts).
      await this.removeJobObjects(request.jobId, existing);
    }

    const baseLabels: Record<string, string> = {
      ...spec.labels,
      [SandboxLabels.managedBy]: SandboxLabels.managedByValue,
      [SandboxLabels.jobId]: request.jobId,
      [SandboxLabels.tenant]: request.tenant,
      [SandboxLabels.keyStyle]: request.agent.keyStyle,
    };
    if (spec.template) baseLabels[SandboxLabels.template] = spec.template;
    const labelsFor = (role: DockerRole): Record<string, string> => ({
      ...baseLabels,
      [DockerRoleLabel]: role,
    });

    try {
      const sharedVolume =
        this.options.agentVolume === 'per-job'
          ? await fillAgentVolume({
              docker: this.docker,
              carrierImage: this.carrierImage,
              volume: names.sharedVolume,
              containerName: names.carrier,
              labels: labelsFor('shared'),
            }).then(() => names.sharedVolume)
          : await this.cached.volumeFor(this.carrierImage, carrierId);

      let work: WorkMount;
      let persistent = '';
      if (spec.persistentWorkspace) {
        persistent = persistentVolumeName(spec.persistentWorkspace.name);
        // Creating an existing volume with the same driver returns it: that is how the next job finds it.
        await this.docker.createVolume({
          Name: persistent,
          Labels: { [SandboxLabels.managedBy]: SandboxLabels.managedByValue, [DockerRoleLabel]: 'workspace' },
        });
        work = { kind: 'volume', name: persistent };
      } else {
        await this.docker.createVolume({ Name: names.workVolume, Labels: labelsFor('work') });
        work = { kind: 'volume', name: names.workVolume };
      }

      for (const v of spec.volumes) {
        if (v.mountPath.replace(/\/+$/, '') === spec.workingDirectory.replace(/\/+$/, '')) {
          throw new SandboxStartError(
            'backend_error',
            `volume ${v.volume}: mountPath ${v.mountPath} is the sandbox's working directory; mount it elsewhere (or under it)`,
          );
        }
        // Idempotent, like the workspace's: the first mount makes it, later ones find it. No job
        // label: it outlives the sandbox, and removeJobObjects must not take it.
        await this.docker.createVolume({
          Name: v.source,
          Labels: {
            [SandboxLabels.managedBy]: SandboxLabels.managedByValue,
            [SandboxLabels.tenant]: request.tenant,
            [DockerRoleLabel]: 'volume',
            [VolumeNameLabel]: v.volume,
          },
        });
      }

      const agent = { ...request.agent, redisUrl: agentRedisUrl };
      const launch = {
        jobId: request.jobId,
        agent,
        workdir: spec.workingDirectory,
        idleTimeoutSeconds: this.options.idleTimeoutSeconds,
      };
      const toolchainLabels = labelsFor('toolchain');
      if (persistent) toolchainLabels[PersistentLabel] = persistent;
      const diskLimit = spec.resources.limits?.ephemeralStorage;
      // Asked once per backend: the engine's storage driver does not change under it.
      this.storageQuota ??= detectStorageQuota(this.docker, this.carrierImage).catch(() => false);
      const storageQuota = diskLimit !== undefined && (await this.storageQuota);
      if (diskLimit !== undefined) toolchainLabels[DiskLimitLabel] = String(memoryToBytes(diskLimit));
      if (storageQuota) toolchainLabels[DiskQuotaLabel] = '1';
      const volumeLimits = volumeLimitsLabel(spec.volumes);
      if (volumeLimits) toolchainLabels[VolumeLimitsLabel] = volumeLimits;
      const container = await this.docker.createContainer(
        toolchainContainerOptions({
          name: names.toolchain,
          spec,
          labels: toolchainLabels,
          sharedVolume,
          work,
          networkMode: network.networkMode,
          ...(guarded ? { macAddress: guarded.mac } : {}),
          runtime,
          storageQuota,
          ...(this.options.cgroupParent ? { cgroupParent: this.options.cgroupParent } : {}),
          agentArgs: agentArgs(launch),
          env: { ...spec.env, ...secrets, ...agent.agentEnv, ...agentEnvironment(launch) },
        }),
      );
      if (spec.user && spec.readOnlyRootFilesystem) {
        await giveWorkVolumeTo(this.docker, {
          image: spec.image,
          volume: work.name,
          workingDirectory: spec.workingDirectory,
          user: spec.user,
          labels: labelsFor('work'),
        });
      } else if (spec.user) await giveWorkDirectoryTo(container, spec.workingDirectory, spec.user);
      // After the container exists (a sweep keeps rules whose container it sees), before it runs.
      if (guarded && this.firewall) await installEgress(this.firewall, guarded, true);
      await container.start();
      // Until the proxy knows its address, the sandbox's redirected 80/443 are closed (never open).
      if (guarded?.proxy) await this.tellProxy(request.jobId, container.id, egress);
      return { jobId: request.jobId, backend: 'docker', id: container.id };
    } catch (err) {
      // Half-made sandboxes are removed here so a failed create never needs a destroy. Not after
      // a name conflict: then a concurrent create of the same job owns those objects.
      if (!isConflict(err)) await this.removeJobObjects(request.jobId).catch(() => {});
      if (err instanceof SandboxStartError) throw err;
      throw new SandboxStartError('backend_error', `Docker create failed: ${(err as Error).message}`);
    }
  }

  async waitReady(ref: SandboxRef, deadlineMs: number, options: WaitReadyOptions): Promise<void> {
    const container = this.docker.getContainer(ref.id);
    const inspectState = async (): Promise<'running' | 'starting' | { exitCode: number } | 'gone'> => {
      try {
        const state = (await container.inspect()).State;
        if (state.Status === 'exited' || state.Status === 'dead') return { exitCode: state.ExitCode };
        return state.Running ? 'running' : 'starting';
      } catch (err) {
        if (isNotFound(err)) return 'gone';
        throw err;
      }
    };
    // The agent's announcement is waited for without polling; the engine is asked (an inspect)
    // every LIVENESS_CHECK_MS for crash detection, and once more when the agent announced itself,
    // to confirm "running AND alive".
    const waited = await waitForAgent<{ exitCode: number } | 'gone'>({
      deadlineMs,
      options,
      ended: async () => {
        const state = await inspectState();
        return state === 'running' || state === 'starting' ? undefined : state;
      },
      confirm: async () => {
        const state = await inspectState();
        return state === 'running' ? 'ready' : state === 'starting' ? undefined : state;
      },
    });
    const outcome = waited.kind === 'ready' ? 'ready' : waited.kind === 'ended' ? waited.ended : undefined;
    if (outcome === 'ready') return;
    if (outcome === 'gone') {
      throw new SandboxStartError(
        'agent_crashed',
        `container ${ref.id} of job ${ref.jobId} disappeared before ready`,
      );
    }
    if (outcome !== undefined) {
      const lines = await containerLogTail(container);
      throw new SandboxStartError(
        'agent_crashed',
        describeCrash(`container ${ref.id.slice(0, 12)} of job ${ref.jobId}`, outcome.exitCode, lines),
      );
    }
    throw new SandboxStartError(
      'deadline',
      `agent of job ${ref.jobId} (container ${ref.id.slice(0, 12)}) did not heart-beat within ${deadlineMs} ms`,
    );
  }

  async destroy(ref: SandboxRef, options: DestroyOptions = {}): Promise<void> {
    const containers = await this.jobContainers(ref.jobId);
    const toolchain = containers.find((c) => c.Labels[DockerRoleLabel] === 'toolchain');
    const keyStyle = KeyStyleSchema.catch('tagged').parse(toolchain?.Labels[SandboxLabels.keyStyle]);
    if (toolchain?.State === 'running') {
      await requestAgentShutdown(this.options.redis, ref.jobId, keyStyle);
      const handle = this.docker.getContainer(toolchain.Id);
      await pollUntil(
        async () => {
          try {
            return (await handle.inspect()).State.Running ? undefined : true;
          } catch (err) {
            if (isNotFound(err)) return true;
            throw err;
          }
        },
        {
          deadline: Date.now() + (options.graceMs ?? this.options.defaultGraceMs ?? 10_000),
          initialIntervalMs: 20,
          maxIntervalMs: 200,
        },
      );
    }
    await this.removeJobObjects(ref.jobId, containers);
    if (toolchain) this.meter.forget(toolchain.Id);
  }

  /**
   * The container's address on the network it joined (the sandbox bridge, or the deny-egress
   * one): the host reaches it there directly (Linux bridge), without any published port.
   */
  async portAddress(ref: SandboxRef, port: number): Promise<{ host: string; port: number } | undefined> {
    try {
      const info = await this.docker.getContainer(ref.id).inspect();
      // On the host's network (development only) its ports are the host's own.
      if (info.HostConfig?.NetworkMode === 'host') return { host: '127.0.0.1', port };
      const networks = info.NetworkSettings?.Networks ?? {};
      const host = Object.values(networks).find((n) => n?.IPAddress)?.IPAddress;
      return host ? { host, port } : undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Replaces a running sandbox's egress policy: its chain is rewritten in one transaction, so new
   * connections follow the new policy as soon as this returns (connections already open stay).
   */
  async updateNetwork(ref: SandboxRef, network: SpecNetwork): Promise<void> {
    const egress = egressOf(SpecNetworkSchema.parse(network));
    if (egress === undefined)
      throw new SandboxStartError(
        'backend_error',
        'network "none" (no network at all) cannot be set on a running sandbox',
      );
    if (!this.firewall) {
      throw new SandboxStartError(
        'backend_error',
        'this Docker backend runs without egress rules (SANDSTREAM_DOCKER_EGRESS=off): a policy cannot be changed',
      );
    }
    const info = await this.docker.getContainer(ref.id).inspect();
    const [name, endpoint] = Object.entries(info.NetworkSettings?.Networks ?? {})[0] ?? [];
    const bridge = name
      ? bridgeInfo((await this.docker.getNetwork(name).inspect()) as Parameters<typeof bridgeInfo>[0])
      : undefined;
    if (!endpoint?.MacAddress || !bridge) {
      throw new SandboxStartError(
        'backend_error',
        `sandbox ${ref.jobId} is on no bridge network: no egress rules to change`,
      );
    }
    const envOf = (name: string) =>
      info.Config.Env.find((e) => e.startsWith(`${name}=`))?.slice(name.length + 1);
    const redisUrl = envOf('REDIS_URL');
    if (!redisUrl)
      throw new SandboxStartError('backend_error', `sandbox ${ref.jobId} has no REDIS_URL to keep open`);
    const target = await egressTarget({
      jobId: ref.jobId,
      mac: endpoint.MacAddress,
      bridge,
      redisUrl,
      collectorUrl: envOf('OTEL_EXPORTER_OTLP_ENDPOINT'),
      egress,
      proxy: this.proxy,
    });
    // Its jumps must already be there: a sandbox that ran without rules is not quietly given some.
    const missingJumps = await this.firewall.missingJumps(target);
    if (missingJumps) throw new SandboxStartError('backend_error', `sandbox ${ref.jobId}: ${missingJumps}`);
    // Widened: the proxy knows the names before the redirect sends traffic; narrowed: after.
    if (target.proxy) await this.tellProxy(ref.jobId, ref.id, egress);
    await installEgress(this.firewall, target, false);
    if (!target.proxy) this.forgetProxySource(ref.jobId);
  }

  /** Tells the egress proxy the sandbox's address and allowed names. */
  private async tellProxy(jobId: string, containerId: string, egress: Egress): Promise<void> {
    const info = await this.docker.getContainer(containerId).inspect();
    const address = Object.values(info.NetworkSettings?.Networks ?? {}).find((n) => n?.IPAddress)?.IPAddress;
    if (!address)
      throw new SandboxStartError(
        'backend_error',
        `sandbox ${jobId} has no IPv4 address for the egress proxy`,
      );
    this.forgetProxySource(jobId);
    this.proxySources.set(jobId, address);
    this.proxy.set(address, egress);
  }

  private forgetProxySource(jobId: string): void {
    const address = this.proxySources.get(jobId);
    if (address !== undefined) this.proxy.forget(address);
    this.proxySources.delete(jobId);
  }

  /** The container runs (its agent is its main process: a dead agent ends the container). */
  async isRunning(ref: SandboxRef): Promise<boolean | undefined> {
    try {
      return (await this.docker.getContainer(ref.id).inspect()).State.Running === true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  async list(): Promise<SandboxInfo[]> {
    const listContainers = () =>
      this.docker.listContainers({
        all: true,
        filters: { label: [managedFilter, `${DockerRoleLabel}=toolchain`] },
      });
    let containers: Dockerode.ContainerInfo[] | undefined;
    const sweepDue = Date.now() - this.lastEgressSweep >= (this.options.egressSweepIntervalMs ?? 30_000);
    if (this.firewall && sweepDue) {
      // The reaper lists every round: rules left by a sandbox whose container is gone go here.
      this.lastEgressSweep = Date.now();
      await sweepEgress(this.firewall, async () => {
        containers = await listContainers();
        return new Set(containers.map((c) => c.Labels[SandboxLabels.jobId] ?? ''));
      }).catch(() => 0);
    }
    containers ??= await listContainers();
    return containers.map((c) => ({
      jobId: c.Labels[SandboxLabels.jobId] ?? '',
      backend: 'docker',
      id: c.Id,
      tenant: c.Labels[SandboxLabels.tenant],
      labels: c.Labels,
      createdAt: new Date(c.Created * 1000),
      state:
        c.State === 'running'
          ? 'running'
          : c.State === 'created'
            ? 'starting'
            : c.State === 'exited'
              ? 'exited'
              : 'unknown',
    }));
  }

  /** The work volume, the container's writable layer and a /tmp tmpfs together (docker-disk.ts). */
  diskUsage(ref: SandboxRef): Promise<SandboxDiskUsage | undefined> {
    return this.meter.usage(ref.id);
  }

  /** SIGKILL to the container: every process in it stops writing at once; destroy removes it. */
  async halt(ref: SandboxRef): Promise<void> {
    await ignoreGone(() => this.docker.getContainer(ref.id).kill());
  }

  /**
   * Its container layer and work volume, the container paused meanwhile (docker-snapshot.ts); under
   * gVisor without `--file-access=shared` its work volume, through the container (docker-files.ts).
   */
  async captureFiles(ref: SandboxRef): Promise<FilesCapture> {
    return captureDockerFiles(this.docker, await dockerFilesRoute(this.docker, ref.id, this.gvisor));
  }

  async restoreFiles(ref: SandboxRef, snapshot: AsyncIterable<Buffer>): Promise<FilesRestored> {
    const route = await dockerFilesRoute(this.docker, ref.id, this.gvisor);
    return restoreDockerFiles(this.docker, route, snapshot);
  }

  /** Its work volume as a plain tree and its layer as a stream under `into`, for a fork on this host (docker-snapshot.ts). */
  async copyFiles(ref: SandboxRef, into: string): Promise<FilesCopied> {
    return copyDocker(await this.layoutOf(ref), into);
  }

  async restoreCopy(ref: SandboxRef, from: string): Promise<Pick<FilesRestored, 'removed' | 'frozenMs'>> {
    return restoreCopyDocker(await this.layoutOf(ref), from);
  }

  async thaw(ref: SandboxRef): Promise<void> {
    await thawDockerFiles(this.docker, ref.id, this.gvisor);
  }

  /**
   * The container's layer and work volume on the host, for plain copies. Not under gVisor with
   * exclusive file access, whose files the host does not see as the sandbox does (docker-files.ts):
   * a fork of one, or into one, goes through the snapshot stream (pod-lifecycle falls back on this
   * error).
   */
  private async layoutOf(ref: SandboxRef) {
    const route = await dockerFilesRoute(this.docker, ref.id, this.gvisor);
    if (route.kind !== 'host')
      throw new Error(
        'a gVisor (runsc) sandbox without --file-access=shared is copied only through its container: no plain copy for forks',
      );
    return containerLayout(this.docker, route.containerId, route.workdir);
  }

  /** The dockerode client is injected and owned by the caller. */
  async close(): Promise<void> {}

  /**
   * The image on the engine, pulled when it is not (with its registry's credentials from
   * pod-lifecycle's own credentials file, never from Redis). A name the registry does not have is
   * `image_not_found`; refused or missing credentials and an unreachable registry `image_pull`.
   */
  private async ensureImage(image: string, onProgress: CreateSandboxRequest['onProgress']): Promise<void> {
    try {
      await this.docker.getImage(image).inspect();
      return;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    let auth: RegistryAuth | undefined;
    try {
      auth = await registryAuthFor(image, this.options.registryAuthFile);
    } catch (err) {
      throw new SandboxStartError(
        'image_pull',
        `image "${image}" is not on the engine and ${(err as Error).message}`,
      );
    }
    await pullImage(this.docker, image, { auth, onProgress, limits: this.options.pullLimits });
  }

  private async requireRuntime(runtimeClass: string, runtime: string): Promise<void> {
    const info = (await this.docker.info()) as { Runtimes?: Record<string, unknown> };
    const known = Object.keys(info.Runtimes ?? {});
    if (!known.includes(runtime)) {
      throw new SandboxStartError('backend_error', missingDockerRuntimeMessage(runtimeClass, runtime, known));
    }
  }

  private async jobContainers(jobId: string): Promise<Dockerode.ContainerInfo[]> {
    return this.docker.listContainers({
      all: true,
      filters: { label: [managedFilter, `${SandboxLabels.jobId}=${jobId}`] },
    });
  }

  /** Containers first (a volume in use cannot go), then the job's own volumes; persistent workspaces stay. */
  async removeVolume(source: string): Promise<void> {
    await ignoreGone(() => this.docker.getVolume(source).remove());
  }

  private async removeJobObjects(jobId: string, known?: Dockerode.ContainerInfo[]): Promise<void> {
    const containers = known ?? (await this.jobContainers(jobId));
    await Promise.all(
      containers.map((c) =>
        ignoreGone(() => this.docker.getContainer(c.Id).remove({ force: true, v: false })),
      ),
    );
    const { Volumes } = await this.docker.listVolumes({
      filters: { label: [managedFilter, `${SandboxLabels.jobId}=${jobId}`] },
    });
    await Promise.all(
      (Volumes ?? [])
        .filter((v) => v.Labels?.[DockerRoleLabel] === 'shared' || v.Labels?.[DockerRoleLabel] === 'work')
        .map((v) => ignoreGone(() => this.docker.getVolume(v.Name).remove())),
    );
    // After the container, so a sandbox never runs without its rules. A sandbox seen on the host
    // network never had any (create installs rules only on a bridge): no `iptables` to run.
    const toolchain = containers.find((c) => c.Labels?.[DockerRoleLabel] === 'toolchain');
    if (toolchain?.HostConfig?.NetworkMode !== 'host') await this.firewall?.remove(jobId);
    this.forgetProxySource(jobId);
  }
}
