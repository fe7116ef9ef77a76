import type { CompletionNotice } from './completion-notice.js';

/** A notice's stream fields (completion-notice.ts), without zod: what the agent writes. */
export function encodeCompletionNotice(notice: CompletionNotice): string[] {
  return ['jobId', notice.jobId, 'stepId', notice.stepId];
}
