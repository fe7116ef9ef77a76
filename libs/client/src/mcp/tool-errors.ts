import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/**
 * What a model is told when a tool call fails: the SDK's own message (it names the sandbox, the
 * field and the limit) with a hint at what to do next. Matched by error name, not class: the
 * CLI loads this module in a bundle of its own, beside the SDK classes of the main bundle.
 */
const NEXT_STEP: Record<string, string> = {
  SandboxNotFoundError: 'check the id with list_sandboxes, or create one with create_sandbox',
  SandboxClosedError: 'it takes no more commands: create a new one with create_sandbox',
  SandboxPausedError: 'it is paused',
  SandboxLimitError: 'make the request smaller or wait for running commands to finish',
  SandboxTimeoutError: 'it may still become ready: try the call again in a while',
  SnapshotNotFoundError: 'snapshot_sandbox answers the ids of snapshots you may use',
  SandboxSpecError: 'fix the named field and call again',
  SandstreamOptionsError: 'fix the named field and call again',
  InfrastructureUnavailableError: 'Sandstream itself is unreachable right now: try again shortly',
  ApiUnreachableError: 'Sandstream itself is unreachable right now: try again shortly',
};

export function toolError(err: unknown, describe: (message: string) => string = (m) => m): CallToolResult {
  const error = err instanceof Error ? err : new Error(String(err));
  const next = NEXT_STEP[error.name];
  const text = describe(next ? `${error.message} (${next})` : `${error.name}: ${error.message}`);
  return { content: [{ type: 'text', text }], isError: true };
}
