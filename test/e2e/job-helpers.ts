import { isTerminal, type JobRecord } from '@sandstream/bus';
import type { SandstreamClient } from '@sandstream/client';

/**
 * Waits for many jobs by polling their records in batches: one follow per job would hold one
 * connection each, which is what a load test must not need.
 */
export async function waitAll(
  client: SandstreamClient,
  jobIds: readonly string[],
  timeoutMs: number,
): Promise<Map<string, JobRecord>> {
  const done = new Map<string, JobRecord>();
  const deadline = Date.now() + timeoutMs;
  while (done.size < jobIds.length) {
    const pending = jobIds.filter((id) => !done.has(id));
    const records = await Promise.all(pending.map((id) => client.get(id)));
    records.forEach((r, i) => {
      if (!r) throw new Error(`job ${pending[i]} vanished before it was seen finished`);
      if (isTerminal(r.state)) done.set(pending[i] as string, r);
    });
    if (done.size === jobIds.length) break;
    if (Date.now() > deadline) {
      const stuck = pending.filter((id) => !done.has(id));
      const states = await Promise.all(
        stuck.slice(0, 10).map(async (id) => `${id}=${(await client.get(id))?.state}`),
      );
      throw new Error(`${stuck.length} jobs not finished after ${timeoutMs} ms: ${states.join(', ')}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return done;
}

/** stdout lines of a finished job, as `stepId:line`. */
export async function outputLines(client: SandstreamClient, jobId: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const item of client.follow(jobId)) {
    if (item.type === 'output' && item.stream === 'stdout') lines.push(`${item.stepId}:${item.line}`);
  }
  return lines;
}
