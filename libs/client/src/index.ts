export type {
  LiveSandboxSpecInput,
  SandboxPauseOptions,
  SandboxRecord,
  SandboxState,
  SubmitResult,
  VolumeCreateInput,
  VolumeInfo,
  VolumeMount,
} from '@sandstream/bus';
export {
  FileTemplateError,
  SandboxSpecError,
  type TemplateInfo,
  TemplateNotFoundError,
  VolumeInUseError,
  VolumeNotFoundError,
} from '@sandstream/bus';
export type { CodeError, CodeLanguage, CodeResult } from '@sandstream/wire';
export * from './client.js';
export * from './code-execution.js';
export * from './command-output.js';
export type { DirectoryWatch, WatchEvent, WatchOptions } from './directory-watch.js';
export * from './events-stream-holding.js';
export * from './follow-cursor.js';
export * from './follow-entry.js';
export { ApiUnreachableError } from './http/http-api.js';
export { errorOfProblem, SandstreamApiError } from './http/problem-errors.js';
export { InfrastructureUnavailableError, infrastructureErrorOf } from './infrastructure-errors.js';
export * from './job-not-found.js';
export * from './log-archive.js';
export * from './sandbox.js';
export * from './sandbox-errors.js';
export type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';
export * from './sandbox-network.js';
export * from './sandbox-options.js';
export type { PauseResult } from './sandbox-pause-result.js';
export * from './sandbox-ports.js';
export * from './sandbox-processes.js';
export * from './sandbox-terminals.js';
export * from './sandboxes.js';
export { gapLines } from './seq-gaps.js';
export * from './snapshots.js';
export { Templates, type TemplateTransport } from './templates.js';
export * from './timeline-gaps.js';
export type { JobTransport, SandboxTransport, SandstreamTransport, TerminalChannel } from './transport.js';
export * from './volumes.js';
