import { useState } from 'preact/hooks';
import { Problem } from '../components/problem';
import { StateBadge } from '../components/state-badge';
import { age, span } from '../format';
import { durationOf, type JobFilter, jobsPath, keepsJob, templateOf } from '../job-list';
import type { Me } from '../me';
import { href } from '../router';
import { JOB_STATES, type Job, type JobState } from '../types';
import { useLiveList } from '../use-live-list';
import { SubmitJob } from './submit-job';

/** Every job the key may see, newest first, kept current by the API's change stream; filter by state, tenant, text. */
export function JobsPage({ me }: { me: Me }) {
  const [filter, setFilter] = useState<JobFilter>({ state: '', tenant: '' });
  const [text, setText] = useState('');
  const jobs = useLiveList<Job>(
    {
      kind: 'jobs',
      path: jobsPath(me, filter, 100),
      ...(me.admin && filter.tenant ? { tenant: filter.tenant } : {}),
      keep: (job) => keepsJob(filter, job),
      limit: 100,
    },
    [filter.state, filter.tenant],
  );
  const now = Date.now();
  const needle = text.trim().toLowerCase();
  const shown = (jobs.data ?? [])
    .filter((job) => job.kind === 'job')
    .filter(
      (job) =>
        !needle ||
        [job.id, job.tenant, templateOf(job), job.state].some((v) => v.toLowerCase().includes(needle)),
    );

  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title">Jobs</h1>
      <SubmitJob onSubmitted={jobs.reload} />
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter jobs">
        <label>
          State{' '}
          <select
            value={filter.state}
            onChange={(e) =>
              setFilter({ ...filter, state: (e.target as HTMLSelectElement).value as JobState | '' })
            }
          >
            <option value="">any</option>
            {JOB_STATES.map((s) => (
              <option value={s} key={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        {me.admin && (
          <label>
            Tenant{' '}
            <input
              value={filter.tenant}
              placeholder="every tenant"
              onChange={(e) => setFilter({ ...filter, tenant: (e.target as HTMLInputElement).value.trim() })}
            />
          </label>
        )}
        <label>
          Search{' '}
          <input
            type="search"
            value={text}
            placeholder="id, template, tenant"
            onInput={(e) => setText((e.target as HTMLInputElement).value)}
          />
        </label>
      </form>
      <Problem error={jobs.error} />
      <table class="list">
        <caption class="visually-hidden">Jobs, newest first (updates live)</caption>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">State</th>
            <th scope="col">Tenant</th>
            <th scope="col">Template</th>
            <th scope="col">Age</th>
            <th scope="col">Duration</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((job) => (
            <tr key={job.id}>
              <td>
                <a href={href('jobs', job.id)}>{job.id}</a>
              </td>
              <td>
                <StateBadge state={job.state} />
              </td>
              <td>{job.tenant}</td>
              <td>{templateOf(job)}</td>
              <td>{age(job.createdAt, now)}</td>
              <td>{span(durationOf(job, now))}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {jobs.data && shown.length === 0 && <p>No jobs.</p>}
    </section>
  );
}
