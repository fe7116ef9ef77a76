import type { V1EnvVar } from '@kubernetes/client-node';
import type { KubeObject } from './kube-object.js';

/** Why a container cannot be created; becomes a CreateContainerConfigError waiting reason. */
export class ContainerConfigError extends Error {}

export interface EnvContext {
  namespace: string;
  podName: string;
  podUid: string;
  /** Looks a Secret up in the pod's namespace. */
  findSecret: (name: string) => KubeObject | undefined;
}

/**
 * Kubernetes' $(VAR) expansion: references to variables defined earlier in the list are
 * replaced, $$ escapes a dollar, unknown references stay as written.
 */
export function expandReferences(text: string, vars: ReadonlyMap<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => {
    if (match === '$$') return '$';
    return name !== undefined && vars.has(name) ? vars.get(name)! : match;
  });
}

function secretValue(
  ref: { name?: string; key: string; optional?: boolean },
  ctx: EnvContext,
): string | undefined {
  const secret = ref.name ? ctx.findSecret(ref.name) : undefined;
  if (!secret) {
    if (ref.optional) return undefined;
    throw new ContainerConfigError(`secret "${ref.name ?? ''}" not found`);
  }
  const data = (secret.data as Record<string, string> | undefined) ?? {};
  if (!(ref.key in data)) {
    if (ref.optional) return undefined;
    throw new ContainerConfigError(`couldn't find key ${ref.key} in Secret ${ctx.namespace}/${ref.name}`);
  }
  return Buffer.from(data[ref.key]!, 'base64').toString('utf8');
}

function fieldValue(path: string, ctx: EnvContext): string {
  switch (path) {
    case 'metadata.name':
      return ctx.podName;
    case 'metadata.namespace':
      return ctx.namespace;
    case 'metadata.uid':
      return ctx.podUid;
    case 'status.podIP':
    case 'status.hostIP':
      // Pods share the host's network in the stand-in.
      return '127.0.0.1';
    default:
      throw new ContainerConfigError(`the stand-in does not support fieldRef ${path}`);
  }
}

/** Resolves a container's env list (values, secretKeyRef, fieldRef) in order, expanding $(VAR). */
export function resolveEnv(env: readonly V1EnvVar[] | undefined, ctx: EnvContext): Map<string, string> {
  const vars = new Map<string, string>();
  for (const entry of env ?? []) {
    let value: string | undefined;
    if (entry.valueFrom?.secretKeyRef) value = secretValue(entry.valueFrom.secretKeyRef, ctx);
    else if (entry.valueFrom?.fieldRef) value = fieldValue(entry.valueFrom.fieldRef.fieldPath, ctx);
    else if (entry.valueFrom)
      throw new ContainerConfigError(
        `env ${entry.name}: the stand-in supports only secretKeyRef and fieldRef`,
      );
    else value = expandReferences(entry.value ?? '', vars);
    if (value !== undefined) vars.set(entry.name, value);
  }
  return vars;
}
