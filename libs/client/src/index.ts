export type { SubmitResult } from '@sandstream/bus';
export * from './client.js';
export * from './follow-entry.js';
export * from './job-not-found.js';
