import { access } from 'node:fs/promises';

/**
 * Starts libuv's thread pool now, while the sandbox has pids to spare. The pool's threads are
 * created all at once on its first use, and the agent may first use it only after a step left
 * processes behind (the step-tree look walks them through fs/promises): in a sandbox whose pids
 * limit a step's fork flood has just used up, creating them then fails and the agent never
 * answers the step. One cheap call once booted makes them part of the agent's own pids.
 */
export function warmThreadPool(): void {
  access('/').catch(() => {});
}
