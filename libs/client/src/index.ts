export * from './client.js';
export * from './follow-entry.js';
