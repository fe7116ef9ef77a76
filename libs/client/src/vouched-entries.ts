import {
  hasJobEventField,
  JOB_EVENT_FIELD,
  jobEventField,
  type KeySpace,
  type RedisClient,
} from '@sandstream/bus';

type StreamEntry = [id: string, fields: string[]];

/**
 * The entries of a job's events stream with every `job` entry (a state change, a cancel request)
 * replaced by the copy the services kept on the job record under its entry id, and emptied when
 * the record holds none. The stream is the sandbox's to write as well (its agent's output), so
 * a step can XADD a `transition … to: succeeded` of its own; the record it cannot touch. Entries
 * keep their ids and places, so the cursor still moves past a forged one and output stays where
 * it was relative to the states. One HMGET per page that has `job` entries (a few per job).
 */
export async function vouchedEntries(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  entries: StreamEntry[],
): Promise<StreamEntry[]> {
  const claimed = entries.filter(([, fields]) => hasJobEventField(fields)).map(([id]) => id);
  if (claimed.length === 0) return entries;
  const copies = await redis.hmget(keys.job(jobId), ...claimed.map(jobEventField));
  const vouched = new Map(claimed.map((id, i) => [id, copies[i] ?? null]));
  return entries.map(([id, fields]) => {
    if (!vouched.has(id)) return [id, fields];
    const copy = vouched.get(id);
    // An empty entry decodes to nothing: a forged state is skipped, never shown.
    return [id, copy ? [JOB_EVENT_FIELD, copy] : []];
  });
}
