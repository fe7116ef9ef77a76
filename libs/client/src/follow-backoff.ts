/** How long a follower waits before its next try after `failures` failed ones: 200 ms doubling to 2 s. */
export function followBackoffMs(failures: number): number {
  return Math.min(100 * 2 ** Math.min(failures, 5), 2000);
}
