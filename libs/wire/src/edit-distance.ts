/**
 * Levenshtein distance between two short strings (object keys). Written here rather than taken
 * from a package: fastest-levenshtein allocates a 256 KB table when it loads, and the agent, which
 * bundles the wire, kept that table in every sandbox's memory for a suggestion it makes only when
 * a key is mistyped (issue 32, idle memory).
 */
export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  if (a.length === 0) return b.length;
  if (b.length === 0) return a.length;
  // One row of the dynamic-programming table at a time: row[j] is the distance between the
  // first i characters of a and the first j of b.
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (row[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      next[j] = Math.min((row[j] as number) + 1, (next[j - 1] as number) + 1, substitution);
    }
    row = next;
  }
  return row[b.length] as number;
}
