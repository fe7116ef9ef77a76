export * from './agent-command.js';
export * from './agent-shutdown.js';
export * from './backend.js';
export * from './backend-env.js';
export * from './create-backend.js';
export * from './detect-backend.js';
export * from './disk-budget-watch.js';
export { allocatedBytes } from './disk-usage.js';
export type { AgentVolumeMode } from './docker/agent-volume.js';
export { DEFAULT_CARRIER_IMAGE, DockerBackend, type DockerBackendOptions } from './docker/docker-backend.js';
export { demuxDockerLog } from './docker/docker-logs.js';
export { dockerJobNames, persistentVolumeName } from './docker/docker-names.js';
export {
  DEFAULT_SANDBOX_BRIDGE,
  DEFAULT_SANDBOX_NETWORK,
  type DenyEgressConfig,
} from './docker/docker-network.js';
export { EgressProxy, type EgressResolver } from './docker/egress-proxy.js';
export {
  DEFAULT_PULL_LIMITS,
  type PullLimits,
  PullProgressTally,
  pullFailure,
  pullImage,
} from './docker/image-pull.js';
export { IptablesEgressFirewall } from './docker/iptables-firewall.js';
export { localCarrierImage } from './docker/local-carrier-image.js';
export { type RegistryAuth, registryAuthFor, registryHostOf } from './docker/registry-credentials.js';
export {
  DEFAULT_AGENT_ENTRY,
  InProcessBackend,
  type InProcessBackendOptions,
} from './inprocess/inprocess-backend.js';
export { DEFAULT_INPROCESS_REGISTRY_KEY } from './inprocess/sandbox-registry.js';
export {
  ALLOW_OPEN_REDIS_ENV,
  type DefaultUserState,
  OpenRedisGuard,
  probeDefaultUser,
} from './open-redis.js';
export { cpuToNanoCpus, memoryToBytes } from './quantity.js';
export * from './resource-policy.js';
export * from './runtime-class.js';
export * from './sandbox-spec.js';
export * from './secret-env.js';
export { checkedWhole, wasCheckedWhole } from './snapshot/checked-whole.js';
export { decodeSnapshot, encodeSnapshot, SNAPSHOT_GZIP_LEVEL } from './snapshot/snapshot-codec.js';
export { SnapshotCorruptError, type SnapshotEntry } from './snapshot/snapshot-entry.js';
export { captureTree } from './snapshot/tree-capture.js';
export {
  copyTree,
  encodeCopiedTrees,
  listTree,
  replaceTreeContents,
  streamPartFile,
  type TreeListing,
  TreeNotCopyableError,
} from './snapshot/tree-copy.js';
export { TreeRestore } from './snapshot/tree-restore.js';
export { loadTemplatesFile, parseTemplates, TemplateFileError } from './templates/load-templates.js';
export {
  type DeclaredPool,
  TemplateRegistry,
  type TemplateRegistryOptions,
  TemplateResolveError,
} from './templates/template-registry.js';
export {
  POOL_MAX_LIMIT,
  type PoolConfig,
  PoolSchema,
  type SpecOverrides,
  SpecOverridesSchema,
  type TemplateRequest,
  TemplateRequestSchema,
  TemplatesFileSchema,
} from './templates/template-schema.js';
