/** "3 s", "4 min", "2 h": how long ago or how long, at a glance. */
export function span(ms: number): string {
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

export function age(since: number, now = Date.now()): string {
  return `${span(now - since)} ago`;
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MB`;
  return `${(n / 1024 ** 3).toFixed(2)} GB`;
}

/** The epoch milliseconds of a stream cursor (`<ms>-<n>` or `<ms>-<n>:<i>`). */
export function cursorTime(cursor: string): number {
  return Number(cursor.split('-')[0]);
}

export function clock(ms: number): string {
  return new Date(ms).toLocaleTimeString();
}
