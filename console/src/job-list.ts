import { enc, getJson } from './api';
import type { Me } from './me';
import { JOB_STATES, type Job, type JobState } from './types';

export interface JobFilter {
  state: JobState | '';
  tenant: string;
}

/**
 * The jobs a key may see, newest first. The API lists by tenant or by state; an admin key with
 * neither filter gets every tenant's by asking each state (a few small reads, merged).
 */
export async function listJobs(me: Me, filter: JobFilter, limit = 100): Promise<Job[]> {
  const query = (extra: string) => `/v1/jobs?limit=${limit}${extra}`;
  const tenant = filter.tenant ? `&tenant=${enc(filter.tenant)}` : '';
  if (filter.state) return getJson<Job[]>(query(`&state=${filter.state}${tenant}`));
  if (!me.admin || filter.tenant) return getJson<Job[]>(query(tenant));
  const pages = await Promise.all(JOB_STATES.map((state) => getJson<Job[]>(query(`&state=${state}`))));
  return pages
    .flat()
    .sort((a, b) => b.createdAt - a.createdAt)
    .slice(0, limit);
}

/** What a job ran: its template, else its image. */
export function templateOf(job: Job): string {
  return job.spec?.template ?? job.spec?.image ?? '—';
}

/** How long it ran (or has been running): from created to finished, or to now. */
export function durationOf(job: Job, now: number): number {
  return (job.finishedAt ?? now) - job.createdAt;
}
