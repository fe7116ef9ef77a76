/**
 * One Node timer per wake-up time, shared by every callback of the process due at that exact
 * time (epoch ms). Loops whose pauses end on a common grid (adaptive-task.ts, `alignedWake`) then
 * run from one timer callback, in one wake-up, and their first Redis commands leave in one
 * auto-pipelined write. A timer each would not do it: Node starts each timer from libuv's cached
 * clock, so timers aimed at the same wall-clock time from different moments fire a few ms apart,
 * each its own wake-up (issue 32 §3: an idle service's CPU is mostly its wake-ups).
 */
interface Slot {
  timer: NodeJS.Timeout;
  callbacks: Set<() => void>;
}

const slots = new Map<number, Slot>();

/** How many shared timers are pending (tests). */
export function pendingTicks(): number {
  return slots.size;
}

/** Runs `callback` at `at` (epoch ms) with whatever else is due then; the returned function cancels it. */
export function onTick(at: number, callback: () => void): () => void {
  let slot = slots.get(at);
  if (slot === undefined) {
    const callbacks = new Set<() => void>();
    const timer = setTimeout(
      () => {
        slots.delete(at);
        let failure: { err: unknown } | undefined;
        for (const run of callbacks) {
          // One callback that throws must not cost the others their round.
          try {
            run();
          } catch (err) {
            failure ??= { err };
          }
        }
        if (failure) throw failure.err;
      },
      Math.max(0, at - Date.now()),
    );
    slot = { timer, callbacks };
    slots.set(at, slot);
  }
  const mine = slot;
  // A closure of its own, so the same function scheduled twice is cancelled once each.
  const entry = () => callback();
  mine.callbacks.add(entry);
  return () => {
    if (!mine.callbacks.delete(entry)) return;
    if (mine.callbacks.size === 0 && slots.get(at) === mine) {
      clearTimeout(mine.timer);
      slots.delete(at);
    }
  };
}
