import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Workspace packages export their compiled dist/; tests read the TypeScript sources directly
// so that a change is tested without a rebuild. Child processes that tests spawn (agent,
// services) still run the built dist/, which `npm test` builds first.
const src = (dir: string) => fileURLToPath(new URL(`./${dir}/src/index.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      '@sandstream/poll': src('libs/poll'),
      // Before the package alias, as telemetry's subpaths below: the wire without zod (the agent's).
      '@sandstream/wire/lean': fileURLToPath(new URL('./libs/wire/src/lean.ts', import.meta.url)),
      '@sandstream/wire': src('libs/wire'),
      '@sandstream/bus': src('libs/bus'),
      '@sandstream/service-kit': src('libs/service-kit'),
      // Test-only code of the sandbox library, kept beside its tests (it needs the library's own
      // types) and never built into its dist.
      '@sandstream/sandbox/testing': fileURLToPath(
        new URL('./libs/sandbox/src/testing/index.ts', import.meta.url),
      ),
      '@sandstream/sandbox': src('libs/sandbox'),
      // Before the package alias: a prefix match would map the subpath under index.ts.
      '@sandstream/telemetry/trace-context': fileURLToPath(
        new URL('./libs/telemetry/src/trace-context.ts', import.meta.url),
      ),
      '@sandstream/telemetry/telemetry-config': fileURLToPath(
        new URL('./libs/telemetry/src/telemetry-config.ts', import.meta.url),
      ),
      '@sandstream/telemetry': src('libs/telemetry'),
      // Before the package alias, as telemetry's subpaths above.
      '@sandstream/client/mcp': fileURLToPath(new URL('./libs/client/src/mcp/index.ts', import.meta.url)),
      '@sandstream/client': src('libs/client'),
      '@sandstream/test-support/vitest': fileURLToPath(
        new URL('./libs/test-support/src/vitest.ts', import.meta.url),
      ),
      '@sandstream/test-support': src('libs/test-support'),
    },
  },
  test: {
    include: ['**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // expect.poll waits for something real (a process started, a record written by a service):
    // its 1 s default is a wall-clock bound a loaded 2-core machine misses (seen in CI: a node
    // server's 'listening' line took longer). A poll still ends at its first success.
    expect: { poll: { timeout: 20_000, interval: 50 } },
    // The machine has two cores and the suites drive real Redis, Docker and child processes;
    // a small fixed pool keeps timing-sensitive tests honest.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
