import { chmod, chown } from 'node:fs/promises';
import type {
  V1Container,
  V1ContainerState,
  V1ContainerStatus,
  V1Pod,
  V1PodCondition,
} from '@kubernetes/client-node';
import { demuxDockerLog } from '@sandstream/sandbox';
import type Docker from 'dockerode';
import { badRequest, notFound } from './api-status.js';
import { containerOptions } from './container-options.js';
import { cutLog } from './docker-logs.js';
import { ContainerConfigError, resolveEnv } from './env-resolver.js';
import type { KubeObject } from './kube-object.js';
import type { ObjectStore } from './object-store.js';

export const STANDIN_LABEL = 'kube-standin/instance';

interface ContainerRuntime {
  spec: V1Container;
  isInit: boolean;
  dockerId?: string;
  state: V1ContainerState;
  imageId?: string;
}

interface PodRuntime {
  namespace: string;
  name: string;
  uid: string;
  pod: V1Pod;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  scheduled: V1PodCondition;
  startTime?: string;
  containers: ContainerRuntime[];
  /** Docker volumes that die with the pod (emptyDir); claim volumes are not listed. */
  ownedVolumes: string[];
  deleting: boolean;
  running: Promise<void>;
}

export interface DockerPodRunnerOptions {
  docker: Docker;
  store: ObjectStore;
  /** Labels of the single node; a pod's nodeSelector must match them to be scheduled. */
  nodeLabels: Record<string, string>;
  /** Put on every container and volume, so close() finds all of this instance's leftovers. */
  instanceId: string;
}

const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/**
 * Plays kubelet and scheduler for the stand-in: runs each pod's init containers to completion in
 * order (sidecars, restartPolicy Always, are started and left running), then its containers,
 * on the local Docker engine, and writes what happens back into the pod's status.
 */
export class DockerPodRunner {
  private readonly pods = new Map<string, PodRuntime>();

  constructor(private readonly options: DockerPodRunnerOptions) {}

  private static key(namespace: string, name: string) {
    return `${namespace}/${name}`;
  }

  /** Docker volume name for a claim: stable, so the same claim finds the same data again. */
  claimVolumeName(namespace: string, claim: string): string {
    return `kube-standin-pvc-${this.options.instanceId}-${namespace}-${claim}`;
  }

  start(object: KubeObject): void {
    const pod = object as unknown as V1Pod;
    const spec = pod.spec!;
    const runtime: PodRuntime = {
      namespace: object.metadata.namespace,
      name: object.metadata.name,
      uid: object.metadata.uid,
      pod,
      phase: 'Pending',
      scheduled: { type: 'PodScheduled', status: 'False', lastTransitionTime: now() as unknown as Date },
      containers: [
        ...(spec.initContainers ?? []).map((c) => ({
          spec: c,
          isInit: true,
          state: { waiting: { reason: 'PodInitializing' } },
        })),
        ...spec.containers.map((c) => ({
          spec: c,
          isInit: false,
          state: {
            waiting: {
              reason: (spec.initContainers ?? []).length > 0 ? 'PodInitializing' : 'ContainerCreating',
            },
          },
        })),
      ],
      ownedVolumes: [],
      deleting: false,
      running: Promise.resolve(),
    };
    this.pods.set(DockerPodRunner.key(runtime.namespace, runtime.name), runtime);
    runtime.running = this.run(runtime).catch((err: unknown) => {
      // Anything unexpected (Docker down, ...) fails the pod rather than the stand-in.
      runtime.phase = 'Failed';
      this.writeStatus(runtime, { reason: 'StandinError', message: (err as Error).message });
    });
  }

  private writeStatus(runtime: PodRuntime, extra: { reason?: string; message?: string } = {}): void {
    const statusOf = (c: ContainerRuntime): V1ContainerStatus => ({
      name: c.spec.name,
      image: c.spec.image ?? '',
      imageID: c.imageId ?? '',
      ...(c.dockerId ? { containerID: `docker://${c.dockerId}` } : {}),
      ready: c.state.running !== undefined && !c.isInit,
      restartCount: 0,
      started: c.state.running !== undefined,
      state: c.state,
    });
    const inits = runtime.containers.filter((c) => c.isInit);
    const mains = runtime.containers.filter((c) => !c.isInit);
    const initialized = inits.every(
      (c) => c.state.terminated?.exitCode === 0 || (c.spec.restartPolicy === 'Always' && c.state.running),
    );
    const ready = runtime.phase === 'Running' && mains.every((c) => c.state.running);
    const condition = (type: string, ok: boolean) => ({
      type,
      status: ok ? 'True' : 'False',
      lastTransitionTime: now(),
    });
    this.options.store.update('pods', runtime.namespace, runtime.name, (object) => {
      object.status = {
        phase: runtime.phase,
        conditions: [
          runtime.scheduled,
          condition('Initialized', initialized),
          condition('ContainersReady', ready),
          condition('Ready', ready),
        ],
        ...(runtime.scheduled.status === 'True' ? { hostIP: '127.0.0.1', podIP: '127.0.0.1' } : {}),
        ...(runtime.startTime ? { startTime: runtime.startTime } : {}),
        ...(extra.reason ? { reason: extra.reason } : {}),
        ...(extra.message ? { message: extra.message } : {}),
        ...(inits.length > 0 ? { initContainerStatuses: inits.map(statusOf) } : {}),
        containerStatuses: mains.map(statusOf),
      };
    });
  }

  private async run(runtime: PodRuntime): Promise<void> {
    const spec = runtime.pod.spec!;
    const { store, nodeLabels } = this.options;
    const unscheduled = (message: string) => {
      runtime.scheduled = {
        type: 'PodScheduled',
        status: 'False',
        reason: 'Unschedulable',
        message,
        lastTransitionTime: now() as unknown as Date,
      };
      this.writeStatus(runtime);
    };
    const mismatch = Object.entries(spec.nodeSelector ?? {}).filter(([k, v]) => nodeLabels[k] !== v);
    if (mismatch.length > 0) {
      return unscheduled(
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
      );
    }
    for (const volume of spec.volumes ?? []) {
      const claim = volume.persistentVolumeClaim?.claimName;
      if (claim && !store.find('persistentvolumeclaims', runtime.namespace, claim)) {
        return unscheduled(`0/1 nodes are available: persistentvolumeclaim "${claim}" not found.`);
      }
    }
    runtime.scheduled = {
      type: 'PodScheduled',
      status: 'True',
      lastTransitionTime: now() as unknown as Date,
    };
    runtime.startTime = now();
    this.writeStatus(runtime);

    const volumes = new Map<string, string>();
    const fsGroup = spec.securityContext?.fsGroup;
    for (const volume of spec.volumes ?? []) {
      const claim = volume.persistentVolumeClaim?.claimName;
      // Every other source (emptyDir, nfs, configMap, ...) is an empty volume that lives with the pod.
      const name = claim
        ? this.claimVolumeName(runtime.namespace, claim)
        : `kube-standin-${runtime.uid.slice(0, 13)}-${volume.name}`;
      const podLabels = { 'kube-standin/namespace': runtime.namespace, 'kube-standin/pod': runtime.name };
      await this.ensureVolume(name, fsGroup, claim ? {} : podLabels);
      if (!claim) runtime.ownedVolumes.push(name);
      volumes.set(volume.name, name);
    }

    for (const container of runtime.containers.filter((c) => c.isInit)) {
      if (runtime.deleting || !(await this.startContainer(runtime, container, volumes))) return;
      if (container.spec.restartPolicy === 'Always') continue; // a sidecar: runs beside the others
      const exitCode = await this.waitForExit(container);
      this.writeStatus(runtime);
      if (exitCode !== 0) {
        runtime.phase = 'Failed';
        for (const c of runtime.containers.filter((c) => !c.isInit))
          c.state = { waiting: { reason: 'PodInitializing' } };
        await this.stopSidecars(runtime);
        return this.writeStatus(runtime);
      }
    }

    const mains = runtime.containers.filter((c) => !c.isInit);
    for (const container of mains) {
      if (runtime.deleting || !(await this.startContainer(runtime, container, volumes))) return;
    }
    runtime.phase = 'Running';
    this.writeStatus(runtime);
    await Promise.all(
      mains.map(async (container) => {
        await this.waitForExit(container);
        this.writeStatus(runtime);
      }),
    );
    runtime.phase = mains.every((c) => c.state.terminated?.exitCode === 0) ? 'Succeeded' : 'Failed';
    await this.stopSidecars(runtime);
    this.writeStatus(runtime);
  }

  /** A named volume with kubelet-like permissions: world-writable, group-owned by fsGroup with setgid. */
  private async ensureVolume(
    name: string,
    fsGroup: number | undefined,
    labels: Record<string, string>,
  ): Promise<void> {
    const { docker, instanceId } = this.options;
    const existing = await docker
      .getVolume(name)
      .inspect()
      .catch(() => undefined);
    if (existing) return;
    await docker.createVolume({ Name: name, Labels: { ...labels, [STANDIN_LABEL]: instanceId } });
    // createVolume answers with a handle, not the volume's details: inspect for the mountpoint.
    const { Mountpoint: mountpoint } = await docker.getVolume(name).inspect();
    // The stand-in runs on the Docker host, so it can set the modes the kubelet would set on an emptyDir.
    try {
      if (fsGroup !== undefined) await chown(mountpoint, 0, fsGroup);
      await chmod(mountpoint, fsGroup !== undefined ? 0o2777 : 0o777);
    } catch {
      // Not on the Docker host or not root: volumes keep Docker's default mode.
    }
  }

  private async startContainer(
    runtime: PodRuntime,
    container: ContainerRuntime,
    volumes: Map<string, string>,
  ): Promise<boolean> {
    const { docker, store, instanceId } = this.options;
    const image = container.spec.image ?? '';
    const info = await docker
      .getImage(image)
      .inspect()
      .catch(() => undefined);
    if (!info) {
      // No registry is reachable here: every pull policy behaves like Never.
      container.state = {
        waiting: {
          reason: 'ErrImageNeverPull',
          message: `Container image "${image}" is not present with pull policy of Never`,
        },
      };
      this.writeStatus(runtime);
      return false;
    }
    container.imageId = info.Id;
    let options: Docker.ContainerCreateOptions;
    try {
      const env = resolveEnv(container.spec.env, {
        namespace: runtime.namespace,
        podName: runtime.name,
        podUid: runtime.uid,
        findSecret: (name) => store.find('secrets', runtime.namespace, name),
      });
      options = containerOptions({
        name: `kube-standin_${runtime.namespace}_${runtime.name}_${container.spec.name}_${runtime.uid.slice(0, 8)}`,
        labels: {
          [STANDIN_LABEL]: instanceId,
          'kube-standin/namespace': runtime.namespace,
          'kube-standin/pod': runtime.name,
          'kube-standin/container': container.spec.name,
        },
        container: container.spec,
        podSecurity: runtime.pod.spec?.securityContext,
        env,
        volumes,
        imageUser: info.Config?.User ?? '',
      });
    } catch (err) {
      if (!(err instanceof ContainerConfigError)) throw err;
      container.state = { waiting: { reason: 'CreateContainerConfigError', message: err.message } };
      this.writeStatus(runtime);
      return false;
    }
    const created = await docker.createContainer(options);
    container.dockerId = created.id;
    if (runtime.deleting) {
      await created.remove({ force: true }).catch(() => {});
      return false;
    }
    try {
      await created.start();
    } catch (err) {
      // What containerd reports when the command cannot be executed at all.
      container.state = {
        terminated: {
          exitCode: 128,
          reason: 'StartError',
          message: (err as Error).message,
          finishedAt: now() as unknown as Date,
        },
      };
      runtime.phase = 'Failed';
      this.writeStatus(runtime);
      return false;
    }
    if (runtime.deleting) {
      // Deleted while this container was starting: it must not outlive its pod.
      await created.kill().catch(() => {});
    }
    container.state = { running: { startedAt: now() as unknown as Date } };
    this.writeStatus(runtime);
    return true;
  }

  private async waitForExit(container: ContainerRuntime): Promise<number> {
    const handle = this.options.docker.getContainer(container.dockerId!);
    const result = (await handle.wait()) as { StatusCode: number };
    const inspected = await handle.inspect().catch(() => undefined);
    const exitCode = result.StatusCode;
    container.state = {
      terminated: {
        exitCode,
        reason: inspected?.State.OOMKilled ? 'OOMKilled' : exitCode === 0 ? 'Completed' : 'Error',
        startedAt: (inspected?.State.StartedAt ?? now()) as unknown as Date,
        finishedAt: (inspected?.State.FinishedAt ?? now()) as unknown as Date,
        ...(container.dockerId ? { containerID: `docker://${container.dockerId}` } : {}),
      },
    };
    return exitCode;
  }

  private async stopSidecars(runtime: PodRuntime): Promise<void> {
    const sidecars = runtime.containers.filter(
      (c) => c.isInit && c.spec.restartPolicy === 'Always' && c.dockerId,
    );
    await Promise.all(
      sidecars.map((c) =>
        this.options.docker
          .getContainer(c.dockerId!)
          .stop({ t: 1 })
          .catch(() => {}),
      ),
    );
  }

  /**
   * Deletes a pod as the kubelet would: SIGTERM, up to `graceSeconds` to exit, SIGKILL, then the
   * containers and the pod's own volumes go. Resolves when nothing of the pod is left.
   */
  async delete(namespace: string, name: string, graceSeconds: number): Promise<void> {
    const runtime = this.pods.get(DockerPodRunner.key(namespace, name));
    if (!runtime) return;
    runtime.deleting = true;
    const { docker } = this.options;
    const withContainers = runtime.containers.filter((c) => c.dockerId);
    await Promise.all(
      withContainers.map((c) =>
        docker
          .getContainer(c.dockerId!)
          .stop({ t: graceSeconds })
          .catch(() => {}),
      ),
    );
    await runtime.running;
    await Promise.all(
      withContainers.map((c) =>
        docker
          .getContainer(c.dockerId!)
          .remove({ force: true })
          .catch(() => {}),
      ),
    );
    await Promise.all(
      runtime.ownedVolumes.map((v) =>
        docker
          .getVolume(v)
          .remove()
          .catch(() => {}),
      ),
    );
    this.pods.delete(DockerPodRunner.key(namespace, name));
  }

  async logs(
    namespace: string,
    name: string,
    containerName: string | undefined,
    tailLines?: number,
    limitBytes?: number,
  ): Promise<string> {
    const runtime = this.pods.get(DockerPodRunner.key(namespace, name));
    const mains = runtime?.containers.filter((c) => !c.isInit) ?? [];
    const chosen = containerName ?? (mains.length === 1 ? mains[0]!.spec.name : undefined);
    if (!chosen) throw badRequest(`a container name must be specified for pod ${name}`);
    const container = runtime?.containers.find((c) => c.spec.name === chosen);
    if (!container) throw badRequest(`container ${chosen} is not valid for pod ${name}`);
    if (!container.dockerId) {
      const reason = container.state.waiting?.reason ?? 'ContainerCreating';
      throw badRequest(`container "${chosen}" in pod "${name}" is waiting to start: ${reason}`);
    }
    const raw = await this.options.docker
      .getContainer(container.dockerId)
      .logs({ stdout: true, stderr: true, follow: false });
    return cutLog(demuxDockerLog(raw as unknown as Buffer), tailLines, limitBytes);
  }

  /** The Docker id of a pod's running container, for exec (a container name is needed when the pod has several). */
  runningContainer(namespace: string, name: string, containerName: string | undefined): string {
    const runtime = this.pods.get(DockerPodRunner.key(namespace, name));
    if (!runtime || runtime.deleting) throw notFound('Pod', name);
    const mains = runtime.containers.filter((c) => !c.isInit);
    const chosen = containerName ?? (mains.length === 1 ? mains[0]!.spec.name : undefined);
    if (!chosen) throw badRequest(`a container name must be specified for pod ${name}`);
    const container = runtime.containers.find((c) => c.spec.name === chosen);
    if (!container) throw badRequest(`container ${chosen} is not valid for pod ${name}`);
    if (!container.dockerId || !container.state.running) {
      throw badRequest(`unable to upgrade connection: container ${chosen} not found in pod ${name}`);
    }
    return container.dockerId;
  }

  /** Removes the volume behind a deleted claim (its data goes, as with a Delete reclaim policy). */
  async deleteClaimVolume(namespace: string, claim: string): Promise<void> {
    await this.options.docker
      .getVolume(this.claimVolumeName(namespace, claim))
      .remove()
      .catch(() => {});
  }

  /** Everything this stand-in instance created on Docker: containers first, then volumes. */
  async close(): Promise<void> {
    const { docker, instanceId } = this.options;
    for (const runtime of this.pods.values()) runtime.deleting = true;
    const filters = JSON.stringify({ label: [`${STANDIN_LABEL}=${instanceId}`] });
    const containers = await docker.listContainers({ all: true, filters });
    await Promise.all(
      containers.map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    );
    await Promise.allSettled([...this.pods.values()].map((r) => r.running));
    const volumes = await docker.listVolumes({ filters });
    await Promise.all(
      (volumes.Volumes ?? []).map((v) =>
        docker
          .getVolume(v.Name)
          .remove()
          .catch(() => {}),
      ),
    );
    this.pods.clear();
  }
}
