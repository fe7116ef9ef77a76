import { setFlagsFromString } from 'node:v8';

/**
 * The agent shares its sandbox's memory with the work it runs, so it asks V8 to favour size
 * over speed. The flags go through v8.setFlagsFromString because that is the one way that works
 * for `node dist/main.js` and for the single executable alike (Node 20's SEA config has no
 * exec-argv; NODE_OPTIONS refuses --optimize-for-size and would leak into every step's child
 * processes). V8 reads these particular flags while it runs, so setting them after start-up
 * still works; each was measured on a 200,000-line step (docs/benchmarks.md, "Agent"):
 *
 * - --optimize-for-size: smaller old-generation growth (without it the single executable
 *   peaked near 90 MB);
 * - --max-semi-space-size=1 and --semi-space-growth-factor=1: the young generation stays at its
 *   initial size. V8 sized it at start-up, so the maximum alone does not hold it; a growth
 *   factor of 1 means the young generation never grows (peak ~114 MB with no flags at all);
 * - --no-flush-bytecode: with --optimize-for-size every full GC also throws away bytecode that
 *   has not run lately, which in an agent between steps is most of its own code; recompiling it
 *   on the next step re-filled the old generation and caused a full GC every dozen small steps
 *   (50 in 600 steps, against 8 with bytecode kept), at ~1 ms of CPU per step.
 *
 * - --interrupt-budget=540672 (8x V8's 67584): how much bytecode a function runs before V8
 *   considers optimising it. The code around each command (pop, decode, launch, deliver) runs a
 *   little per command, and TurboFan took 2–18 ms of CPU to compile each such function, ~650 ms
 *   over an agent's first 1,600 commands: 15–18 % of its CPU per `exec(['true'])` in a sandbox
 *   that runs a few hundred. Loops over output (a 200,000-line step) still cross the budget in
 *   a moment; their CPU moved by ≤ 3 % (docs/benchmarks.md, "CPU per exec, part 2").
 *
 * Rejected: --no-opt (12 MB less RSS, but throughput fell to a tenth), --single-threaded-gc
 * (cannot be changed after start-up).
 */
const V8_FLAGS = [
  '--optimize-for-size',
  '--max-semi-space-size=1',
  '--semi-space-growth-factor=1',
  '--no-flush-bytecode',
  '--interrupt-budget=540672',
] as const;

export function tuneV8ForSize(): void {
  for (const flag of V8_FLAGS) setFlagsFromString(flag);
}

/** Exits with the code `run` resolves with; a rejection is the fatal exit 3, logged as one JSON line. */
export function exitWhenDone(run: Promise<number>): void {
  run.then(
    (code) => process.exit(code),
    (err: unknown) => {
      // The logger may not have loaded; write the one JSON line by hand.
      const error = err instanceof Error ? { message: err.message, stack: err.stack } : String(err);
      process.stderr.write(
        `${JSON.stringify({ time: new Date().toISOString(), level: 'error', msg: 'fatal error', error })}\n`,
      );
      process.exit(3);
    },
  );
}
