import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { parseAllDocuments } from 'yaml';

/** One Kubernetes object as read from YAML: enough typing to find it by kind and name. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}

/** The kinds deploy/k8s holds, each with its kubernetes-models schema. */
const validators: Record<string, (o: never) => { validate(): void }> = {
  'v1/Namespace': (o) => new Namespace(o),
  'v1/ServiceAccount': (o) => new ServiceAccount(o),
  'v1/ConfigMap': (o) => new ConfigMap(o),
  'v1/Secret': (o) => new Secret(o),
  'rbac.authorization.k8s.io/v1/Role': (o) => new Role(o),
  'rbac.authorization.k8s.io/v1/RoleBinding': (o) => new RoleBinding(o),
  'apps/v1/Deployment': (o) => new Deployment(o),
  'apps/v1/StatefulSet': (o) => new StatefulSet(o),
  'v1/Service': (o) => new Service(o),
  'networking.k8s.io/v1/NetworkPolicy': (o) => new NetworkPolicy(o),
  'policy/v1/PodDisruptionBudget': (o) => new PodDisruptionBudget(o),
};

/**
 * Validates `object` against the Kubernetes schema of its kind; throws naming the kind when no
 * schema is known (a new kind must be added above, not slip through unchecked).
 */
export function validateKubeObject(object: KubeObject): void {
  const validator = validators[`${object.apiVersion}/${object.kind}`];
  if (!validator) throw new Error(`no schema for ${object.apiVersion} ${object.kind}`);
  validator(object as never).validate();
}

/** Every document of a multi-document YAML text; a syntax error throws naming `source`. */
export function parseKubeObjects(text: string, source: string): KubeObject[] {
  return parseAllDocuments(text).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${source}: ${doc.errors[0]?.message}`);
    return doc.toJSON() as KubeObject;
  });
}
