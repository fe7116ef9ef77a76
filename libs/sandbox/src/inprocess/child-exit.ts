import type { ChildProcess } from 'node:child_process';

/**
 * Resolves true once `child` has exited (at once if it had), false after `timeoutMs`. A child of
 * this process says when it ends (libuv reaps it then), so a wait for it needs no liveness reads
 * every few milliseconds: a destroy used to poll kill(0) and /proc every 10–100 ms until its
 * agent was gone, each read four thread-pool round trips (issue 32 §3).
 */
export function childExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onExit = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolve(false);
    }, timeoutMs);
    child.once('exit', onExit);
  });
}
