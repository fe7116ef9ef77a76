import * as z from 'zod';

export * from './completion-encode.js';

/**
 * When the agent is started with `--notify-stream <key>`, it XADDs one of these after each
 * StepResult, so that a dispatcher can learn of completions for thousands of jobs from a few
 * shared streams instead of holding a blocking pop per job. The StepResult itself stays on the
 * job's results list; the notice only says where to look.
 */
export const CompletionNoticeSchema = z.object({
  jobId: z.string(),
  stepId: z.string(),
});
export type CompletionNotice = z.infer<typeof CompletionNoticeSchema>;

export function decodeCompletionNotice(fields: readonly string[]): CompletionNotice | null {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i] as string] = fields[i + 1] as string;
  const parsed = CompletionNoticeSchema.safeParse(record);
  return parsed.success ? parsed.data : null;
}
