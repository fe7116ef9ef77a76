import { useEffect, useState } from 'preact/hooks';
import { enc, getJson, request } from '../api';
import { Problem } from '../components/problem';
import { StateBadge } from '../components/state-badge';
import { clock, span } from '../format';
import { templateOf } from '../job-list';
import { phasesOf } from '../job-timeline';
import { href } from '../router';
import { followEvents } from '../sse';
import { type Job, TERMINAL_STATES, type TimelineItem } from '../types';
import { usePoll } from '../use-poll';
import { Output } from './output';
import { Timeline } from './timeline';

/** A job: its record and steps, its output live over SSE (resumed after a drop), its phases, cancel. */
export function JobPage({ id }: { id: string }) {
  const [items, setItems] = useState<TimelineItem[]>([]);
  const [status, setStatus] = useState('connecting');
  const [tab, setTab] = useState<'output' | 'timeline'>('output');
  const [actionError, setActionError] = useState<string | undefined>(undefined);
  const job = usePoll(() => getJson<Job>(`/v1/jobs/${enc(id)}`), 3000, [id]);

  useEffect(() => {
    const stop = new AbortController();
    setItems([]);
    const pending: TimelineItem[] = [];
    let flush: number | undefined;
    void followEvents(`/v1/jobs/${enc(id)}/events`, {
      signal: stop.signal,
      // Lines come in bursts: they are shown once per frame, not once per line.
      onEvent: (event) => {
        if (event.event === 'error' || event.event === 'end') return;
        pending.push(JSON.parse(event.data) as TimelineItem);
        if (event.event === 'state') job.reload();
        flush ??= requestAnimationFrame(() => {
          flush = undefined;
          const batch = pending.splice(0);
          setItems((before) => before.concat(batch));
        });
      },
      onStatus: (s, detail) => setStatus(detail ? `${s}: ${detail}` : s),
      isLast: (event) =>
        event.event === 'state' && (JSON.parse(event.data) as { terminal?: boolean }).terminal === true,
    });
    return () => {
      stop.abort();
      if (flush !== undefined) cancelAnimationFrame(flush);
    };
  }, [id]);

  const record = job.data;
  const cancel = async () => {
    setActionError(undefined);
    try {
      await request(`/v1/jobs/${enc(id)}`, { method: 'DELETE' });
      job.reload();
    } catch (err) {
      setActionError(err instanceof Error ? err.message : String(err));
    }
  };
  const finished = record ? TERMINAL_STATES.includes(record.state) : false;

  return (
    <section aria-labelledby="job-title">
      <p>
        <a href={href('jobs')}>← Jobs</a>
      </p>
      <h1 id="job-title">Job {id}</h1>
      <Problem error={job.error} />
      {record && (
        <dl class="facts">
          <dt>State</dt>
          <dd>
            <StateBadge state={record.state} />
            {record.reason ? ` — ${record.reason}` : ''}
          </dd>
          <dt>Tenant</dt>
          <dd>{record.tenant}</dd>
          <dt>Template</dt>
          <dd>{templateOf(record)}</dd>
          <dt>Created</dt>
          <dd>{clock(record.createdAt)}</dd>
          <dt>Duration</dt>
          <dd>{span((record.finishedAt ?? Date.now()) - record.createdAt)}</dd>
          <dt>Start</dt>
          <dd>
            {record.sandbox?.start
              ? `${record.sandbox.start.kind}${record.sandbox.start.reason ? ` (${record.sandbox.start.reason})` : ''}`
              : '—'}
          </dd>
        </dl>
      )}
      <div class="actions">
        <button type="button" onClick={cancel} disabled={!record || finished}>
          Cancel job
        </button>
        <Problem error={actionError} />
      </div>
      {record && <Steps job={record} />}
      <div role="tablist" aria-label="Job views" class="tabs">
        <button type="button" role="tab" aria-selected={tab === 'output'} onClick={() => setTab('output')}>
          Output
        </button>
        <button
          type="button"
          role="tab"
          aria-selected={tab === 'timeline'}
          onClick={() => setTab('timeline')}
        >
          Timeline
        </button>
      </div>
      <p class="stream-status" aria-live="polite">
        stream: {status}
      </p>
      {tab === 'output' ? <Output items={items} /> : <Timeline phases={phasesOf(record, items)} />}
    </section>
  );
}

function Steps({ job }: { job: Job }) {
  const results = Object.entries(job.stepResults);
  if (results.length === 0) return null;
  return (
    <table class="list">
      <caption>Steps</caption>
      <thead>
        <tr>
          <th scope="col">Step</th>
          <th scope="col">Exit code</th>
          <th scope="col">Duration</th>
          <th scope="col">Error</th>
        </tr>
      </thead>
      <tbody>
        {results.map(([stepId, result]) => (
          <tr key={stepId}>
            <td>{stepId}</td>
            <td>
              {result.exitCode ?? (result.timedOut ? 'timed out' : result.cancelled ? 'cancelled' : '—')}
            </td>
            <td>{span(result.durationSeconds * 1000)}</td>
            <td>{result.errorMessage ?? ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
