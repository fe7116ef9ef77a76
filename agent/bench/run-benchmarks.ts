import { benchLogArchive } from './log-archive.js';
import { benchMemory } from './memory.js';
import { benchRoundTrip } from './round-trip.js';
import { benchStepCost } from './step-cost.js';
import { benchThroughput } from './throughput.js';

/**
 * `npm run bench -w @sandstream/agent`: builds the agent, then runs the built agent against the
 * Redis at REDIS_URL (default 127.0.0.1:6379) and prints each measurement with its baseline.
 */
const only = process.argv[2];
console.log(`agent benchmarks, node ${process.version}, ${new Date().toISOString()}`);
if (!only || only === 'round-trip') await benchRoundTrip();
if (!only || only === 'round-trip' || only === 'step-cost') {
  await benchStepCost();
  // The same with no child process: what the agent's own machinery costs per step.
  await benchStepCost(200, 20, { kind: 'readFile', path: 'package.json' });
}
if (!only || only === 'throughput') await benchThroughput();
if (!only || only === 'log-archive') await benchLogArchive();
// `... memory 200000` measures only the step sizes given.
const sizes = process.argv
  .slice(3)
  .map(Number)
  .filter((n) => n > 0);
if (!only || only === 'memory') await benchMemory(sizes.length > 0 ? sizes : undefined);
process.exit(0);
