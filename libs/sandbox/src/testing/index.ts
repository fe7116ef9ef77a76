// Test-only: the SandboxBackend contract suite and what the backend tests share. Excluded from the
// package's build; other workspaces' tests reach it as `@sandstream/sandbox/testing` (a vitest and
// test/tsconfig.json alias, not an export of the package).
export * from './backend-suite.js';
export * from './docker-test-env.js';
export * from './step-channel.js';
