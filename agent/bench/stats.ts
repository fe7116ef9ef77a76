export { percentile, summarize } from '@sandstream/test-support';

export const ms = (n: number) => `${n.toFixed(3)} ms`;
