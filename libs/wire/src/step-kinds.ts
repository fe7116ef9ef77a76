/** What the agent needs of step.ts besides the schemas, without zod. */
export const STEP_KINDS = [
  'run',
  'readFile',
  'writeFile',
  'listFiles',
  'grep',
  'stats',
  'shell',
  'upload',
  'download',
  'terminal',
  'code',
  'watch',
  'shutdown',
] as const;
export type StepKind = (typeof STEP_KINDS)[number];

/** The decoded size of a run step's stdin (the agent refuses it past Limits.runStdinMaxBytes). */
export function stdinBytes(step: {
  stdin?: string | undefined;
  stdinEncoding?: 'utf8' | 'base64' | undefined;
}): number {
  if (step.stdin === undefined) return 0;
  return Buffer.byteLength(step.stdin, step.stdinEncoding === 'base64' ? 'base64' : 'utf8');
}
