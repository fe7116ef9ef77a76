export * from './destroy-sandbox.js';
export * from './egress-reapply.js';
export * from './lease-keeper.js';
export * from './pod-lifecycle-config.js';
export * from './start-failure.js';
export * from './start-sandbox.js';
