import { isTerminal } from '@sandstream/bus';
import type { SandstreamClient } from '@sandstream/client';

export interface OneStepJobsRun {
  /** From the first submit until the last job was seen terminal. */
  seconds: number;
  /** Per job, createdAt -> finishedAt from its own record, in the order they were seen to finish. */
  latencies: number[];
  /** Jobs that ended in a state other than succeeded. */
  failed: number;
}

/**
 * Submits `count` jobs of one `true` step at once (ids `${idPrefix}${i}`, in `image`: the
 * in-process backend ignores it) and polls their records
 * until every one is terminal, for the throughput benches. Latency comes from each record's own
 * timestamps, so the 100 ms polling interval does not add to it; only `seconds` carries it.
 */
export async function runOneStepJobs(
  client: SandstreamClient,
  idPrefix: string,
  count: number,
  image = 'none',
): Promise<OneStepJobsRun> {
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const { jobId } = await client.submit({
      id: `${idPrefix}${i}`,
      image,
      steps: [{ command: 'true' }],
    });
    ids.push(jobId);
  }
  const pending = new Set(ids);
  const latencies: number[] = [];
  let failed = 0;
  while (pending.size > 0) {
    await new Promise((r) => setTimeout(r, 100));
    const list = [...pending];
    const records = await Promise.all(list.map((id) => client.get(id)));
    records.forEach((r, i) => {
      if (!r || !isTerminal(r.state)) return;
      pending.delete(list[i] as string);
      if (r.state !== 'succeeded') failed++;
      latencies.push((r.finishedAt ?? 0) - r.createdAt);
    });
    if (performance.now() - t0 > 600_000) throw new Error(`${pending.size} jobs unfinished after 10 minutes`);
  }
  return { seconds: (performance.now() - t0) / 1000, latencies, failed };
}
