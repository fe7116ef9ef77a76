import { z } from 'zod';

/**
 * `spec.runtimeClass` is one portable name per isolation runtime; each backend calls it
 * differently. gVisor is `runsc` to a Docker engine (the name its `runtimes` entry is registered
 * under) and the RuntimeClass `gvisor` on Kubernetes (the name GKE and the gVisor docs use).
 * A value not in the table passes through unchanged, so an operator's own runtime (`kata`, a
 * second runsc entry with other flags) still works by its backend-specific name.
 */
export const RuntimeNameMapSchema = z.record(z.string().min(1), z.string().min(1));
export type RuntimeNameMap = z.infer<typeof RuntimeNameMapSchema>;

export const DEFAULT_DOCKER_RUNTIMES: RuntimeNameMap = { gvisor: 'runsc' };
export const DEFAULT_KUBERNETES_RUNTIME_CLASSES: RuntimeNameMap = { gvisor: 'gvisor' };

export function dockerRuntimeFor(runtimeClass: string, overrides: RuntimeNameMap = {}): string {
  return overrides[runtimeClass] ?? DEFAULT_DOCKER_RUNTIMES[runtimeClass] ?? runtimeClass;
}

export function kubernetesRuntimeClassFor(runtimeClass: string): string {
  return DEFAULT_KUBERNETES_RUNTIME_CLASSES[runtimeClass] ?? runtimeClass;
}

/**
 * Why a Docker engine cannot run `runtimeClass`, with the fix. Said before anything is created:
 * the engine's own error ("unknown or invalid runtime name") names neither the template's value
 * nor how to get the runtime.
 */
export function missingDockerRuntimeMessage(runtimeClass: string, runtime: string, known: string[]): string {
  const has = known.length > 0 ? known.join(', ') : 'none';
  const base = `runtimeClass "${runtimeClass}" needs the Docker runtime "${runtime}", which this engine does not have (it has: ${has})`;
  if (runtime !== 'runsc')
    return `${base}; register it in the engine's daemon.json "runtimes" and reload dockerd (SIGHUP)`;
  return `${base}. Install gVisor (Debian package runsc), register it in the engine's daemon.json as "runtimes": {"runsc": {"path": "runsc", "runtimeArgs": ["--platform=ptrace", "--network=host"]}} and reload dockerd (SIGHUP); as root, \`npm test\` and \`npm start\` do all three (scripts/ensure-docker.sh)`;
}
