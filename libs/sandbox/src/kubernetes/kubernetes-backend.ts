import { isIP } from 'node:net';
import type {
  CoreV1Api,
  KubeConfig,
  NetworkingV1Api,
  V1NetworkPolicyPeer,
  V1OwnerReference,
  V1Pod,
} from '@kubernetes/client-node';
import {
  allowEntries,
  type Egress,
  egressOf,
  formatIssues,
  JobIdSchema,
  KeyStyleSchema,
  type SpecNetwork,
  SpecNetworkSchema,
} from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { requestAgentShutdown } from '../agent-shutdown.js';
import {
  type CreateSandboxRequest,
  type DestroyOptions,
  type FilesCapture,
  type FilesRestored,
  type SandboxBackend,
  type SandboxInfo,
  SandboxLabels,
  type SandboxRef,
  SandboxStartError,
  type WaitReadyOptions,
} from '../backend.js';
import { OpenRedisGuard } from '../open-redis.js';
import { withResourcePolicy } from '../resource-policy.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { EgressForwardProxy } from './egress-forward-proxy.js';
import {
  networkPolicyAccessLookup,
  newProxyToken,
  PROXY_TOKEN_ANNOTATION,
  proxyEnv,
  proxyTokenHash,
} from './egress-proxy-access.js';
import {
  apiMessageOf,
  ignoreNotFound,
  isAlreadyExists,
  isNotFound,
  isQuotaExceeded,
  statusCodeOf,
} from './kube-api-errors.js';
import { egressPolicyName, redisUrlSecretName, sandboxPodName } from './kube-names.js';
import type { KubernetesSettings } from './kubernetes-settings.js';
import { capturePod, type PodTarget, restorePod } from './kubernetes-snapshot.js';
import {
  buildEgressPolicy,
  kubernetesEgressRefusal,
  type PolicyProxy,
  redisUrlOfPolicy,
  sandboxPodOwner,
} from './network-policy-builder.js';
import { ownerReferencesFor } from './owner-reference.js';
import { assessPod, type PodAssessment } from './pod-assessment.js';
import { buildSandboxPod, TOOLCHAIN_CONTAINER } from './pod-builder.js';
import { freezePod, thawPod } from './pod-freeze.js';
import { type PodTemplate, parsePodTemplate } from './pod-template.js';
import { PodInformer } from './pod-watch.js';
import {
  buildRedisUrlSecret,
  REDIS_URL_SECRET_KEY,
  redisUrlHasPassword,
} from './redis-url-secret-builder.js';
import { MANAGED_SELECTOR, SandboxAnnotations } from './sandbox-metadata.js';
import { buildWorkspaceClaim } from './workspace-claim-builder.js';

export interface KubernetesBackendDeps {
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  networking: NetworkingV1Api;
  settings: KubernetesSettings;
  /**
   * When given, destroy() asks the agent to shut down (a shutdown step); without it the caller
   * does before destroy(). The job's keys are never the backend's (tearDownSandbox, libs/bus,
   * frees the sandbox's footprint after destroy).
   */
  redis?: Redis;
}

const DEFAULT_GRACE_MS = 10_000;
/** How long destroy() waits for a deleted pod to disappear before it returns anyway. */
const GONE_WAIT_EXTRA_MS = 5_000;

function startError(reason: ConstructorParameters<typeof SandboxStartError>[0], message: string) {
  return new SandboxStartError(reason, message);
}

/** Sandboxes as pods: one pod per job, plus its NetworkPolicy, Redis URL Secret and workspace PVC when asked for. */
export class KubernetesBackend implements SandboxBackend {
  readonly kind = 'kubernetes' as const;
  /** Cancels every wait in progress (its watch included); close() calls them all. */
  private readonly waits = new Set<() => void>();
  private closed = false;
  /** Every wait of this backend follows its pod through this one informer (one watch in all). */
  private readonly pods: PodInformer;
  private readonly openRedis: OpenRedisGuard;
  private proxy: EgressForwardProxy | undefined;

  constructor(private readonly deps: KubernetesBackendDeps) {
    this.openRedis = new OpenRedisGuard({
      allowOpenRedis: deps.settings.allowOpenRedis,
      backend: 'kubernetes',
    });
    this.pods = new PodInformer({
      kubeConfig: deps.kubeConfig,
      core: deps.core,
      namespace: deps.settings.namespace,
      labelSelector: MANAGED_SELECTOR,
    });
  }

  private get namespace(): string {
    return this.deps.settings.namespace;
  }

  async create(request: CreateSandboxRequest): Promise<SandboxRef> {
    const jobId = JobIdSchema.safeParse(request.jobId);
    if (!jobId.success) throw startError('backend_error', formatIssues(jobId.error, 'jobId'));
    // Parsed again rather than trusted: a caller may hand over a spec that never met the schema.
    const parsedSpec = SandboxSpecSchema.safeParse(request.spec);
    if (!parsedSpec.success) throw startError('backend_error', formatIssues(parsedSpec.error, 'spec'));
    const { settings } = this.deps;
    const spec = withResourcePolicy(parsedSpec.data, settings.resourcePolicy);
    const podName = sandboxPodName(request.jobId);
    const templates: PodTemplate[] = [];
    if (settings.podTemplate) templates.push(settings.podTemplate);
    if (spec.podTemplate) {
      try {
        templates.push(parsePodTemplate(spec.podTemplate, 'spec.podTemplate'));
      } catch (err) {
        throw startError('backend_error', (err as Error).message);
      }
    }

    // Before anything is made: pod-lifecycle runs in the cluster, so it reaches the URL the pod gets.
    await this.openRedis.check(request.agent.redisUrl);

    // A pod from an earlier attempt of this very create (pod-lifecycle killed mid-start, Redis
    // down after the pod was made) is replaced, before this attempt's Secret and policy exist:
    // its agent started with that attempt's credentials, which this attempt's Redis user no
    // longer accepts, so adopting it would strand the sandbox at its first reconnect.
    if (await this.isPodOfJob(podName, request.jobId)) await this.discardPod(podName);

    if (spec.persistentWorkspace) {
      await this.ensureWorkspaceClaim(
        spec.persistentWorkspace.name,
        spec.persistentWorkspace.size ?? settings.defaultWorkspaceSize,
        request.tenant,
      );
    }

    // The tenant's volumes: a PVC each, of the operator's storage class, made at the first mount.
    for (const v of spec.volumes) {
      await this.ensureWorkspaceClaim(
        v.source,
        v.sizeLimitBytes !== undefined ? String(v.sizeLimitBytes) : settings.defaultWorkspaceSize,
        request.tenant,
        v.volume,
      );
    }

    const created: Array<() => Promise<void>> = [];
    try {
      const redisUrlSecret = await this.prepareRedisUrl(request, podName, created);
      const egress = kubernetesEgress(spec.network, 'spec.network', this.proxyState());
      // Only a sandbox that names domains at create gets the proxy in its environment: the others
      // keep their tools' direct connections (and a later update to domains is refused, saying why).
      const token = hasDomains(egress) && settings.egressProxy ? newProxyToken() : undefined;
      const tokenSha256 = token ? proxyTokenHash(token) : undefined;
      // Created before the pod: the pod must never run a moment without its policy. Owned by the
      // service's pod until the sandbox's exists, then by the sandbox's (below).
      await this.applyEgressPolicy(
        { jobId: request.jobId, tenant: request.tenant, redisUrl: request.agent.redisUrl, podName },
        egress,
        ownerReferencesFor(settings.owner, this.namespace),
        'create',
        tokenSha256,
      );
      created.push(() => this.deletePolicy(podName));

      const pod = buildSandboxPod({
        jobId: request.jobId,
        tenant: request.tenant,
        spec,
        agent: request.agent,
        namespace: this.namespace,
        carrierImage: settings.agentCarrierImage,
        carrierPullPolicy: settings.agentCarrierPullPolicy,
        toolchainPullPolicy: settings.toolchainPullPolicy,
        terminationGraceSeconds: settings.terminationGraceSeconds,
        toolchainReadOnlyRootFilesystem: settings.toolchainReadOnlyRootFilesystem,
        templates,
        ...(settings.owner ? { owner: settings.owner } : {}),
        ...(settings.serviceAccountName ? { serviceAccountName: settings.serviceAccountName } : {}),
        ...(redisUrlSecret ? { redisUrlSecret } : {}),
        ...(token && settings.egressProxy
          ? { proxyEnv: proxyEnv(settings.egressProxy.url, podName, token) }
          : {}),
      });
      let made: V1Pod;
      try {
        made = await this.deps.core.createNamespacedPod({ namespace: this.namespace, body: pod });
      } catch (err) {
        if (isAlreadyExists(err) && (await this.isPodOfJob(podName, request.jobId))) {
          // A create of the same job running at the same moment made it: the pod is ours already.
          return { jobId: request.jobId, backend: 'kubernetes', id: podName };
        }
        throw err;
      }
      // Now owned by the sandbox's pod: the garbage collector deletes it with the pod, whoever
      // deletes the pod (destroy, the reaper, an operator, an eviction). Best effort: a failure
      // here must not reach the catch below, which would delete the policy of a pod that runs;
      // left owned by the service's pod, it still applies and destroy still deletes it.
      const uid = made.metadata?.uid;
      if (uid) {
        await this.applyEgressPolicy(
          { jobId: request.jobId, tenant: request.tenant, redisUrl: request.agent.redisUrl, podName },
          egress,
          sandboxPodOwner({ name: podName, uid }),
          'replace',
          tokenSha256,
        ).catch(() => undefined);
      }
      return { jobId: request.jobId, backend: 'kubernetes', id: podName };
    } catch (err) {
      await Promise.allSettled(created.map((undo) => undo()));
      throw this.toStartError(err, `creating sandbox pod ${podName}`);
    }
  }

  private toStartError(err: unknown, doing: string): Error {
    if (err instanceof SandboxStartError) return err;
    if (isQuotaExceeded(err)) {
      return startError(
        'quota',
        `namespace ${this.namespace} has no quota left for another sandbox (${apiMessageOf(err)}); retry when a sandbox ends or raise the ResourceQuota`,
      );
    }
    const code = statusCodeOf(err);
    if (code === 403) {
      return startError(
        'backend_error',
        `${doing}: forbidden (${apiMessageOf(err)}). Check the service account's Role (deploy/k8s/base/1-rbac.yaml).`,
      );
    }
    if (code === 400 || code === 422) {
      return startError('backend_error', `${doing}: the API server rejected it: ${apiMessageOf(err)}`);
    }
    return startError('backend_error', `${doing}: ${apiMessageOf(err)}`);
  }

  private async createOrReplace(
    create: () => Promise<unknown>,
    replace: () => Promise<unknown>,
    kind: string,
  ): Promise<void> {
    try {
      await create();
    } catch (err) {
      // Left over from an earlier attempt for the same job (same deterministic name): overwrite.
      if (!isAlreadyExists(err)) throw this.toStartError(err, `creating ${kind}`);
      await replace();
    }
  }

  /**
   * Creates the sandbox's NetworkPolicy (`create`: replacing a leftover of an earlier attempt), or
   * replaces it whole (`replace`: re-owned to the pod, a live update; created when missing).
   */
  private async applyEgressPolicy(
    sandbox: { jobId: string; tenant: string; redisUrl: string; podName: string },
    egress: Egress,
    ownerReferences: V1OwnerReference[] | undefined,
    mode: 'create' | 'replace',
    /** The hash of the sandbox's egress proxy token, when its pod was given one. */
    tokenSha256?: string,
  ): Promise<void> {
    const { settings } = this.deps;
    const proxy = tokenSha256 ? this.policyProxy(tokenSha256) : undefined;
    const policy = buildEgressPolicy({
      ...sandbox,
      namespace: this.namespace,
      egress,
      ...(proxy ? { proxy } : {}),
      ingressPeers: (settings.previewIngressPeers as V1NetworkPolicyPeer[] | undefined) ?? [
        {
          podSelector: {
            matchLabels: { 'app.kubernetes.io/name': 'api', 'app.kubernetes.io/part-of': 'sandstream' },
          },
        },
      ],
      ...(settings.redisEgressPeers
        ? { redisPeers: settings.redisEgressPeers as V1NetworkPolicyPeer[] }
        : {}),
      ...(settings.dnsEgressPeers ? { dnsPeers: settings.dnsEgressPeers as V1NetworkPolicyPeer[] } : {}),
      ...(ownerReferences ? { ownerReferences } : {}),
    });
    const name = egressPolicyName(sandbox.podName);
    const create = () =>
      this.deps.networking.createNamespacedNetworkPolicy({ namespace: this.namespace, body: policy });
    const replace = () =>
      this.deps.networking.replaceNamespacedNetworkPolicy({ name, namespace: this.namespace, body: policy });
    if (mode === 'create') return this.createOrReplace(create, replace, 'NetworkPolicy');
    try {
      await replace();
    } catch (err) {
      // A sandbox from before every sandbox had a policy (internet had none): give it one.
      if (!isNotFound(err)) throw this.toStartError(err, `replacing NetworkPolicy ${name}`);
      await create();
    }
  }

  /**
   * Serves the egress proxy on settings.egressProxy.listenPort, every address (the sandboxes reach
   * it through a Service), when that is set; nothing otherwise.
   */
  async serve(): Promise<void> {
    const listenPort = this.deps.settings.egressProxy?.listenPort;
    if (listenPort === undefined || this.proxy) return;
    this.proxy = new EgressForwardProxy({
      access: networkPolicyAccessLookup(this.deps.networking, this.namespace),
      port: listenPort,
    });
    try {
      await this.proxy.listen();
    } catch (err) {
      this.proxy = undefined;
      throw new Error(`egress proxy could not listen on port ${listenPort}: ${(err as Error).message}`);
    }
  }

  /** Checked before an update is queued; updateNetwork also knows whether the pod has the proxy. */
  egressRefusal(egress: Egress, prefix: string): string | undefined {
    return kubernetesEgressRefusal(egress, prefix, this.proxyState());
  }

  private proxyState(): 'ready' | 'missing' {
    return this.deps.settings.egressProxy ? 'ready' : 'missing';
  }

  /** The proxy as a policy names it (settings.egressProxy, validated to be http://host[:port]). */
  private policyProxy(tokenSha256: string): PolicyProxy {
    const configured = this.deps.settings.egressProxy;
    if (!configured)
      throw new SandboxStartError(
        'backend_error',
        'this sandbox uses the egress proxy, and the backend option egressProxy is not set',
      );
    const url = new URL(configured.url);
    return {
      peers: (configured.peers as V1NetworkPolicyPeer[] | undefined) ?? [
        {
          podSelector: {
            matchLabels: {
              'app.kubernetes.io/name': 'egress-proxy',
              'app.kubernetes.io/part-of': 'sandstream',
            },
          },
        },
      ],
      port: Number(url.port || 80),
      needsDns: isIP(url.hostname.replace(/^\[|\]$/g, '')) === 0,
      tokenSha256,
    };
  }

  /**
   * Replaces a running sandbox's NetworkPolicy (the `sandbox-network` queue, pod-lifecycle). The
   * API server has it when this returns; the CNI applies it to new connections shortly after
   * (asynchronously, as every policy change on Kubernetes), connections already open may stay.
   */
  async updateNetwork(ref: SandboxRef, network: SpecNetwork): Promise<void> {
    const parsed = SpecNetworkSchema.parse(network);
    kubernetesEgress(parsed, 'network', this.proxyState());
    const pod = await this.readPod(ref.id);
    const uid = pod?.metadata?.uid;
    if (!pod || !uid || pod.metadata?.deletionTimestamp)
      throw new SandboxStartError('backend_error', `sandbox ${ref.jobId}: its pod ${ref.id} is gone`);
    const { redisUrl, tokenSha256 } = await this.currentPolicy(pod);
    // Kept whatever the new policy: the pod's environment still names the proxy, and a later
    // update may list domains again.
    const egress = kubernetesEgress(
      parsed,
      'network',
      tokenSha256 ? 'ready' : this.deps.settings.egressProxy ? 'not-in-pod' : 'missing',
    );
    await this.applyEgressPolicy(
      {
        jobId: pod.metadata?.annotations?.[SandboxAnnotations.jobId] ?? ref.jobId,
        tenant: pod.metadata?.annotations?.[SandboxAnnotations.tenant] ?? '',
        redisUrl,
        podName: ref.id,
      },
      egress,
      sandboxPodOwner({ name: ref.id, uid }),
      'replace',
      tokenSha256,
    );
  }

  /**
   * What a replaced policy keeps of the current one: the Redis it keeps open (the endpoint its
   * policy was made for, else, for a sandbox made before every sandbox had a policy, its pod's
   * plain REDIS_URL) and the hash of the pod's egress proxy token, when it has one.
   */
  private async currentPolicy(pod: V1Pod): Promise<{ redisUrl: string; tokenSha256?: string }> {
    const name = pod.metadata?.name ?? '';
    let tokenSha256: string | undefined;
    try {
      const policy = await this.deps.networking.readNamespacedNetworkPolicy({
        name: egressPolicyName(name),
        namespace: this.namespace,
      });
      tokenSha256 = policy.metadata?.annotations?.[PROXY_TOKEN_ANNOTATION];
      const url = redisUrlOfPolicy(policy);
      if (url) return { redisUrl: url, ...(tokenSha256 ? { tokenSha256 } : {}) };
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const env = pod.spec?.containers.find((c) => c.name === TOOLCHAIN_CONTAINER)?.env ?? [];
    const plain = env.find((e) => e.name === 'REDIS_URL')?.value;
    if (plain) return { redisUrl: plain, ...(tokenSha256 ? { tokenSha256 } : {}) };
    throw new SandboxStartError(
      'backend_error',
      `sandbox pod ${name}: its Redis endpoint is on neither its NetworkPolicy nor its pod, so a policy keeping Redis open cannot be built`,
    );
  }

  private async prepareRedisUrl(
    request: CreateSandboxRequest,
    podName: string,
    created: Array<() => Promise<void>>,
  ): Promise<{ secretName: string; key: string } | undefined> {
    const source = this.deps.settings.redisUrlSource;
    if (typeof source === 'object') return source;
    const mode =
      source === 'auto' ? (redisUrlHasPassword(request.agent.redisUrl) ? 'per-sandbox' : 'plain') : source;
    if (mode === 'plain') return undefined;
    const secret = buildRedisUrlSecret({
      podName,
      namespace: this.namespace,
      jobId: request.jobId,
      tenant: request.tenant,
      redisUrl: request.agent.redisUrl,
      ...(this.deps.settings.owner ? { owner: this.deps.settings.owner } : {}),
    });
    const name = secret.metadata!.name!;
    await this.createOrReplace(
      () => this.deps.core.createNamespacedSecret({ namespace: this.namespace, body: secret }),
      () => this.deps.core.replaceNamespacedSecret({ name, namespace: this.namespace, body: secret }),
      'Secret',
    );
    created.push(() => this.deleteRedisSecret(podName));
    return { secretName: name, key: REDIS_URL_SECRET_KEY };
  }

  async removeVolume(source: string): Promise<void> {
    try {
      await this.deps.core.deleteNamespacedPersistentVolumeClaim({ name: source, namespace: this.namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  private async ensureWorkspaceClaim(
    name: string,
    size: string,
    tenant: string,
    volume?: string,
  ): Promise<void> {
    try {
      await this.deps.core.readNamespacedPersistentVolumeClaim({ name, namespace: this.namespace });
      return;
    } catch (err) {
      if (!isNotFound(err)) throw this.toStartError(err, `reading workspace claim ${name}`);
    }
    const claim = buildWorkspaceClaim({
      name,
      namespace: this.namespace,
      tenant,
      size,
      ...(volume ? { volume } : {}),
      ...(this.deps.settings.storageClassName
        ? { storageClassName: this.deps.settings.storageClassName }
        : {}),
    });
    try {
      await this.deps.core.createNamespacedPersistentVolumeClaim({ namespace: this.namespace, body: claim });
    } catch (err) {
      // Another replica created it between our read and our create: that is what we wanted.
      if (!isAlreadyExists(err)) throw this.toStartError(err, `creating workspace claim ${name}`);
    }
  }

  private async isPodOfJob(podName: string, jobId: string): Promise<boolean> {
    try {
      const pod = await this.deps.core.readNamespacedPod({ name: podName, namespace: this.namespace });
      return pod.metadata?.annotations?.[SandboxAnnotations.jobId] === jobId;
    } catch {
      return false;
    }
  }

  waitReady(ref: SandboxRef, deadlineMs: number, options: WaitReadyOptions): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the Kubernetes backend is closed'));
    const { settings } = this.deps;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      let lastDetail = 'the pod was not seen yet';
      let heartbeatTimer: NodeJS.Timeout | undefined;
      let heartbeatError: string | undefined;

      const finish = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadlineTimer);
        if (heartbeatTimer) clearTimeout(heartbeatTimer);
        handle.stop();
        this.waits.delete(cancel);
        options.signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      const onAbort = () => finish(new Error(`waiting for sandbox ${ref.id} was aborted`));
      const cancel = () =>
        finish(new Error(`waiting for sandbox ${ref.id} stopped: the Kubernetes backend was closed`));

      const pollHeartbeat = async () => {
        heartbeatTimer = undefined;
        if (settled) return;
        try {
          if (await options.isAgentAlive()) return finish();
          heartbeatError = undefined;
        } catch (err) {
          heartbeatError = (err as Error).message;
        }
        if (!settled) heartbeatTimer = setTimeout(() => void pollHeartbeat(), settings.heartbeatPollMs);
      };

      const onAssessment = async (pod: V1Pod, assessment: PodAssessment) => {
        if (assessment.state === 'pending') {
          lastDetail = `still starting (${assessment.detail})`;
          return;
        }
        if (assessment.state === 'running') {
          lastDetail = `the pod runs but the agent has sent no heartbeat${heartbeatError ? ` (last check failed: ${heartbeatError})` : ''}`;
          if (!heartbeatTimer) void pollHeartbeat();
          return;
        }
        let message = `sandbox ${ref.id}: ${assessment.message}`;
        if (assessment.logContainer && settings.crashLogTailLines > 0) {
          const tail = await this.logTail(pod, assessment.logContainer);
          if (tail) message += `\n--- last lines of ${assessment.logContainer} ---\n${tail}`;
        }
        finish(startError(assessment.reason, message));
      };

      const handle = this.pods.watch(ref.id, {
        onPod: (pod) => void onAssessment(pod, assessPod(pod)),
        onGone: () =>
          finish(
            startError(
              'backend_error',
              `sandbox ${ref.id}: the pod was deleted before the sandbox became ready`,
            ),
          ),
      });
      this.waits.add(cancel);
      const deadlineTimer = setTimeout(
        () =>
          finish(
            startError(
              'deadline',
              `sandbox ${ref.id} did not become ready within ${Math.round(deadlineMs / 100) / 10}s: ${lastDetail}`,
            ),
          ),
        deadlineMs,
      );
      options.signal?.addEventListener('abort', onAbort, { once: true });
      if (options.signal?.aborted) onAbort();
    });
  }

  private async logTail(pod: V1Pod, container: string): Promise<string | undefined> {
    const name = pod.metadata?.name;
    if (!name) return undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      const log = await Promise.race([
        this.deps.core.readNamespacedPodLog({
          name,
          namespace: this.namespace,
          container,
          tailLines: this.deps.settings.crashLogTailLines,
          limitBytes: 16 * 1024,
        }),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), 3000);
        }),
      ]);
      return log?.trimEnd() || undefined;
    } catch {
      // The log is a courtesy: the failure reason stands without it.
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  async destroy(ref: SandboxRef, options: DestroyOptions = {}): Promise<void> {
    const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
    const pod = await this.readPod(ref.id);
    const keyStyle = KeyStyleSchema.safeParse(pod?.metadata?.labels?.[SandboxLabels.keyStyle]);
    const style = keyStyle.success ? keyStyle.data : 'tagged';
    const redis = this.deps.redis;
    if (pod) {
      const phase = pod.status?.phase;
      const running = phase === 'Running';
      if (redis && running) await requestAgentShutdown(redis, ref.jobId, style);
      const ended = running && graceMs > 0 ? await this.waitUntil(ref.id, graceMs, isPodEnded) : !running;
      await ignoreNotFound(() =>
        this.deps.core.deleteNamespacedPod({
          name: ref.id,
          namespace: this.namespace,
          // The agent already exited (or never ran): no reason to wait. Otherwise SIGTERM, then kill.
          gracePeriodSeconds: ended ? 0 : this.deps.settings.terminationGraceSeconds,
          propagationPolicy: 'Background',
        }),
      );
    }
    await Promise.all([this.deletePolicy(ref.id), this.deleteRedisSecret(ref.id)]);
    if (pod) {
      await this.waitUntil(
        ref.id,
        this.deps.settings.terminationGraceSeconds * 1000 + GONE_WAIT_EXTRA_MS,
        () => false,
      );
    }
  }

  /**
   * Deletes an earlier attempt's pod at once (no shutdown step: its result would land in the new
   * agent's result list) and waits until it is gone, so the same name can be created again.
   */
  private async discardPod(podName: string): Promise<void> {
    await ignoreNotFound(() =>
      this.deps.core.deleteNamespacedPod({
        name: podName,
        namespace: this.namespace,
        gracePeriodSeconds: 0,
        propagationPolicy: 'Background',
      }),
    );
    await this.waitUntil(
      podName,
      this.deps.settings.terminationGraceSeconds * 1000 + GONE_WAIT_EXTRA_MS,
      () => false,
    );
  }

  /** The pod runs and none of its containers has terminated (the agent is the toolchain's main process). */
  /** The pod's IP: reachable from the API's pod where the cluster's network policy lets it. */
  /**
   * The work volume, read by `tar` run in the pod through `pods/exec` (kubernetes-snapshot.ts);
   * the sandbox's processes below the agent are stopped meanwhile (pod-freeze.ts).
   */
  async captureFiles(ref: SandboxRef): Promise<FilesCapture> {
    const target = await this.podTarget(ref);
    return capturePod(target, () => freezePod(target));
  }

  /** The work volume made exactly the snapshot's `work/` part, streamed into the pod's `tar`. */
  async restoreFiles(ref: SandboxRef, snapshot: AsyncIterable<Buffer>): Promise<FilesRestored> {
    const target = await this.podTarget(ref);
    return restorePod(target, snapshot, () => freezePod(target));
  }

  async thaw(ref: SandboxRef): Promise<void> {
    let target: PodTarget;
    try {
      target = await this.podTarget(ref);
    } catch {
      // Gone, or no longer running: nothing is left stopped.
      return;
    }
    await thawPod(target);
  }

  /** Where a pod's work volume is, for an exec into its toolchain container. */
  private async podTarget(ref: SandboxRef): Promise<PodTarget> {
    const pod = await this.deps.core.readNamespacedPod({ name: ref.id, namespace: this.namespace });
    const container = pod.spec?.containers.find((c) => c.name === TOOLCHAIN_CONTAINER);
    const workdir = container?.volumeMounts?.find((m) => m.name === 'work')?.mountPath;
    if (!workdir)
      throw new Error(
        `sandbox ${ref.id}: its pod has no work volume in its ${TOOLCHAIN_CONTAINER} container`,
      );
    if (pod.status?.phase !== 'Running') {
      throw new Error(`sandbox ${ref.id}: its pod is ${pod.status?.phase ?? 'not started'}, not Running`);
    }
    return {
      kubeConfig: this.deps.kubeConfig,
      namespace: this.namespace,
      pod: ref.id,
      container: TOOLCHAIN_CONTAINER,
      workdir,
    };
  }

  async portAddress(ref: SandboxRef, port: number): Promise<{ host: string; port: number } | undefined> {
    const host = (await this.readPod(ref.id))?.status?.podIP;
    return host ? { host, port } : undefined;
  }

  async isRunning(ref: SandboxRef): Promise<boolean | undefined> {
    const pod = await this.readPod(ref.id);
    if (!pod || pod.metadata?.deletionTimestamp) return false;
    if (pod.status?.phase !== 'Running') return pod.status?.phase === 'Pending' ? undefined : false;
    return !(pod.status.containerStatuses ?? []).some((c) => c.state?.terminated);
  }

  private async readPod(name: string): Promise<V1Pod | undefined> {
    try {
      return await this.deps.core.readNamespacedPod({ name, namespace: this.namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Watches the pod until `done(pod)` holds (true) or the pod is gone (true) or time runs out (false). */
  private waitUntil(name: string, timeoutMs: number, done: (pod: V1Pod) => boolean): Promise<boolean> {
    return new Promise((resolve) => {
      const finish = (value: boolean) => {
        clearTimeout(timer);
        handle.stop();
        this.waits.delete(cancel);
        resolve(value);
      };
      const cancel = () => finish(false);
      const handle = this.pods.watch(name, {
        onPod: (pod) => {
          if (done(pod)) finish(true);
        },
        onGone: () => finish(true),
      });
      this.waits.add(cancel);
      const timer = setTimeout(() => finish(false), timeoutMs);
    });
  }

  private deletePolicy(podName: string): Promise<void> {
    return ignoreNotFound(() =>
      this.deps.networking.deleteNamespacedNetworkPolicy({
        name: egressPolicyName(podName),
        namespace: this.namespace,
      }),
    );
  }

  private deleteRedisSecret(podName: string): Promise<void> {
    // Only per-sandbox secrets carry this name; an operator's shared secret is never touched.
    return ignoreNotFound(() =>
      this.deps.core.deleteNamespacedSecret({ name: redisUrlSecretName(podName), namespace: this.namespace }),
    );
  }

  async list(): Promise<SandboxInfo[]> {
    const pods = await this.deps.core.listNamespacedPod({
      namespace: this.namespace,
      labelSelector: MANAGED_SELECTOR,
    });
    return pods.items.map((pod) => toSandboxInfo(pod));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const cancel of [...this.waits]) cancel();
    await this.pods.stop();
    await this.proxy?.close();
    this.proxy = undefined;
  }
}

function isPodEnded(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return true;
  const toolchain = pod.status?.containerStatuses?.find((s) => s.name === TOOLCHAIN_CONTAINER);
  return toolchain?.state?.terminated !== undefined;
}

function toSandboxInfo(pod: V1Pod): SandboxInfo {
  const labels = pod.metadata?.labels ?? {};
  const annotations = pod.metadata?.annotations ?? {};
  const phase = pod.status?.phase;
  const created = pod.metadata?.creationTimestamp;
  return {
    jobId: annotations[SandboxAnnotations.jobId] ?? labels[SandboxLabels.jobId] ?? '',
    backend: 'kubernetes',
    id: pod.metadata?.name ?? '',
    tenant: annotations[SandboxAnnotations.tenant] ?? labels[SandboxLabels.tenant],
    labels,
    createdAt: created ? new Date(created) : undefined,
    state:
      pod.metadata?.deletionTimestamp || phase === 'Succeeded' || phase === 'Failed'
        ? 'exited'
        : phase === 'Running'
          ? 'running'
          : phase === 'Pending'
            ? 'starting'
            : 'unknown',
  };
}

/**
 * The policy spec.network stands for on this backend, or a start failure naming the field when it
 * cannot be enforced here (domain entries without the proxy: network-policy-builder.ts). The
 * string `none` (no network at all) is the Redis-only policy: a pod always has a network interface.
 */
function kubernetesEgress(
  network: SpecNetwork,
  field: string,
  proxy: 'ready' | 'missing' | 'not-in-pod',
): Egress {
  const egress = egressOf(network) ?? 'none';
  const refused = kubernetesEgressRefusal(egress, field, proxy);
  if (refused) throw new SandboxStartError('backend_error', refused);
  return egress;
}

function hasDomains(egress: Egress): boolean {
  return allowEntries(egress).some((e) => e.kind === 'domain');
}
