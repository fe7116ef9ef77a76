/**
 * Kubernetes-style quantities turned into the integers Docker wants. The spec schema already
 * restricts the shapes; these functions only convert.
 */
const memoryUnits: Record<string, number> = {
  '': 1,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 1024,
  Mi: 1024 ** 2,
  Gi: 1024 ** 3,
  Ti: 1024 ** 4,
};

export function memoryToBytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$/.exec(quantity);
  if (!match)
    throw new Error(`memory quantity ${JSON.stringify(quantity)} is not a number with an optional unit`);
  return Math.round(Number(match[1]) * (memoryUnits[match[2] ?? ''] ?? 1));
}

/** "500m" -> 0.5e9, "2" -> 2e9 (Docker's NanoCpus). */
export function cpuToNanoCpus(quantity: string): number {
  const milli = /^(\d+)m$/.exec(quantity);
  if (milli) return Number(milli[1]) * 1e6;
  if (!/^\d+(\.\d+)?$/.test(quantity)) {
    throw new Error(`cpu quantity ${JSON.stringify(quantity)} is not cores ("0.5") or millicores ("500m")`);
  }
  return Math.round(Number(quantity) * 1e9);
}
