/**
 * Names of the JetStream log archive, shared by the archiver (services/reaper) and the readers
 * (the CLI and SDK), so both sides always agree on where a job's output lives.
 *
 * - stream: `SANDSTREAM_LOGS_<NAMESPACE>`, the namespace upper-cased and every character outside
 *   [A-Z0-9_-] replaced by `_` (stream names may not contain `.`, `*`, `>` or spaces).
 * - subjects: `<prefix>.<namespace>.logs.<jobId>`, one per job, under `<prefix>.<namespace>.logs.>`,
 *   the job id's dots written `~` (a character job ids never have): an id such as `a..b` or `a.`
 *   would otherwise make a subject with an empty token, which NATS refuses.
 */
export interface LogArchiveNames {
  /** The JetStream stream holding every job's archived output of this namespace. */
  stream: string;
  /** The wildcard the stream is bound to. */
  subjects: string;
  /** The one subject of a job's archived output. */
  subject(jobId: string): string;
}

export const DEFAULT_LOG_ARCHIVE_PREFIX = 'sandstream';

export function logArchiveNames({
  prefix = DEFAULT_LOG_ARCHIVE_PREFIX,
  namespace,
}: {
  prefix?: string;
  namespace: string;
}): LogArchiveNames {
  const base = `${prefix}.${namespace}.logs`;
  return {
    stream: `SANDSTREAM_LOGS_${namespace.toUpperCase().replace(/[^A-Z0-9_-]/g, '_')}`,
    subjects: `${base}.>`,
    subject: (jobId) => `${base}.${jobId.replaceAll('.', '~')}`,
  };
}
