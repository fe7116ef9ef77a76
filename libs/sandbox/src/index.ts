export * from './backend.js';
export * from './sandbox-spec.js';
