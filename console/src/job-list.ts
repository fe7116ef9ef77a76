import type { Me } from './me';
import { JOB_STATES, type Job, type JobState } from './types';

export interface JobFilter {
  state: JobState | '';
  tenant: string;
}

/**
 * The GET path of the jobs a key may see, newest first. The API lists by tenant or by states; an
 * admin key with neither filter asks for every state in one request (the API merges them).
 */
export function jobsPath(me: Me, filter: JobFilter, limit: number): string {
  const query = new URLSearchParams({ limit: String(limit) });
  if (filter.tenant) query.set('tenant', filter.tenant);
  if (filter.state) query.set('state', filter.state);
  else if (me.admin && !filter.tenant) query.set('state', JOB_STATES.join(','));
  return `/v1/jobs?${query}`;
}

/** Whether a job (as a change brings it) belongs in the list as filtered. */
export function keepsJob(filter: JobFilter, job: Job): boolean {
  return (!filter.state || job.state === filter.state) && (!filter.tenant || job.tenant === filter.tenant);
}

/** What a job ran: its template, else its image. */
export function templateOf(job: Job): string {
  return job.spec?.template ?? job.spec?.image ?? '—';
}

/** How long it ran (or has been running): from created to finished, or to now. */
export function durationOf(job: Job, now: number): number {
  return (job.finishedAt ?? now) - job.createdAt;
}
