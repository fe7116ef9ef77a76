import type { V1Pod } from '@kubernetes/client-node';
import { type JsonObject, type PodTemplate, templateBody } from './pod-template.js';

/**
 * How an array in the template combines with the generated one. Kubernetes' strategic merge
 * knows these per field; a pod template only touches a handful, so the rules are spelt out here
 * by field name (the names do not clash inside a Pod spec).
 */
type ArrayRule =
  | { kind: 'mergeByKey'; key: string } // same key: deep-merge the items; new key: append
  | { kind: 'replaceByKey'; key: string } // same key: the template's item wins whole; new key: append
  | { kind: 'appendUnique' }; // append items not already present

const arrayRules: Record<string, ArrayRule> = {
  containers: { kind: 'mergeByKey', key: 'name' },
  initContainers: { kind: 'mergeByKey', key: 'name' },
  ephemeralContainers: { kind: 'mergeByKey', key: 'name' },
  // An env var is value XOR valueFrom: merging two items could produce both, so replace whole.
  env: { kind: 'replaceByKey', key: 'name' },
  // A volume has exactly one source (emptyDir, nfs, ...): same reasoning.
  volumes: { kind: 'replaceByKey', key: 'name' },
  volumeMounts: { kind: 'replaceByKey', key: 'mountPath' },
  imagePullSecrets: { kind: 'replaceByKey', key: 'name' },
  ports: { kind: 'replaceByKey', key: 'containerPort' },
  resourceClaims: { kind: 'replaceByKey', key: 'name' },
  envFrom: { kind: 'appendUnique' },
  tolerations: { kind: 'appendUnique' },
  hostAliases: { kind: 'appendUnique' },
  topologySpreadConstraints: { kind: 'appendUnique' },
  readinessGates: { kind: 'appendUnique' },
};

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function mergeArrays(field: string, base: unknown[], overlay: unknown[]): unknown[] {
  const rule = arrayRules[field];
  // Arrays without a rule (command, args, ...) are values: the template's replaces the generated one.
  if (!rule) return structuredClone(overlay);
  const result = structuredClone(base);
  for (const item of overlay) {
    if (rule.kind === 'appendUnique') {
      const text = JSON.stringify(item);
      if (!result.some((existing) => JSON.stringify(existing) === text)) result.push(structuredClone(item));
      continue;
    }
    const key = isObject(item) ? item[rule.key] : undefined;
    const index = key === undefined ? -1 : result.findIndex((e) => isObject(e) && e[rule.key] === key);
    if (index < 0) result.push(structuredClone(item));
    else if (rule.kind === 'mergeByKey') result[index] = mergeValue('', result[index], item);
    else result[index] = structuredClone(item);
  }
  return result;
}

/** `null` in the template removes the generated field (as in a strategic merge patch). */
function mergeValue(field: string, base: unknown, overlay: unknown): unknown {
  if (overlay === undefined) return structuredClone(base);
  if (Array.isArray(base) && Array.isArray(overlay)) return mergeArrays(field, base, overlay);
  if (isObject(base) && isObject(overlay)) {
    const result: JsonObject = structuredClone(base);
    for (const [key, value] of Object.entries(overlay)) {
      if (value === null) delete result[key];
      else result[key] = mergeValue(key, result[key], value);
    }
    return result;
  }
  return structuredClone(overlay);
}

/**
 * Merges operator pod templates into a generated pod, in order (later templates win). The
 * template may add or change anything in the spec — containers merge by name (use `toolchain` and
 * `inject-agent` to change the generated ones), volumes, init containers and sidecars are
 * appended, nodeSelector / tolerations / imagePullSecrets combine — but it cannot change the
 * pod's identity: name, namespace, owner references and the labels and annotations the backend
 * finds its pods by stay as generated.
 */
export function mergePodTemplates(pod: V1Pod, templates: readonly PodTemplate[]): V1Pod {
  let spec = (pod.spec ?? {}) as JsonObject;
  const labels: Record<string, string> = {};
  const annotations: Record<string, string> = {};
  for (const template of templates) {
    const body = templateBody(template);
    spec = mergeValue('', spec, body.spec) as JsonObject;
    Object.assign(labels, (body.metadata.labels as Record<string, string> | undefined) ?? {});
    Object.assign(annotations, (body.metadata.annotations as Record<string, string> | undefined) ?? {});
  }
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      labels: { ...labels, ...pod.metadata?.labels },
      annotations: { ...annotations, ...pod.metadata?.annotations },
    },
    spec: spec as unknown as V1Pod['spec'],
  };
}
