import { benchMemory } from './memory.js';
import { benchRoundTrip } from './round-trip.js';
import { benchThroughput } from './throughput.js';

/**
 * `npm run bench -w @sandstream/agent`: builds the agent, then runs the built agent against the
 * Redis at REDIS_URL (default 127.0.0.1:6379) and prints each measurement with its baseline.
 */
const only = process.argv[2];
console.log(`agent benchmarks, node ${process.version}, ${new Date().toISOString()}`);
if (!only || only === 'round-trip') await benchRoundTrip();
if (!only || only === 'throughput') await benchThroughput();
if (!only || only === 'memory') await benchMemory();
process.exit(0);
