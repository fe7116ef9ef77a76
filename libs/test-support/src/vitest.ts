// The part of test-support that needs a running vitest (fixtures, hooks); the main entry does
// not import vitest, so benchmarks run its helpers under plain node.
export { it, type SandstreamFixtures, test } from './fixtures.js';
export { useInMemoryTracing } from './in-memory-tracing.js';
export { type PrivateRedis, usePrivateRedis } from './private-redis.js';
