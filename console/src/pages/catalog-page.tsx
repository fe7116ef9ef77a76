import { getJson, request } from '../api';
import { Problem } from '../components/problem';
import type { Me } from '../me';
import type { PoolFigures, QueueFigures, Templates } from '../types';
import { usePoll } from '../use-poll';

/**
 * The queue dashboard's pages cannot carry the bearer key: a session cookie is made with it
 * first (HttpOnly, SameSite=Strict), then the dashboard opens.
 */
async function openDashboard(event: Event) {
  event.preventDefault();
  await request('/v1/auth/session', { method: 'POST' });
  location.href = '/admin/queues';
}

/** Templates, warm pools (size, members booting and ready, claim hits and misses) and work-queue depths. */
export function CatalogPage({ me }: { me: Me }) {
  const templates = usePoll(() => getJson<Templates>('/v1/templates'), 10_000, []);
  const pools = usePoll(() => getJson<PoolFigures[]>('/v1/pools'), 3000, []);
  const queues = usePoll(() => getJson<QueueFigures[]>('/v1/queues'), 3000, []);
  return (
    <section aria-labelledby="catalog-title">
      <h1 id="catalog-title">Pools, templates and queues</h1>
      {me.admin && (
        <p>
          <a href="/admin/queues" onClick={openDashboard}>
            Queue dashboard (admin)
          </a>
        </p>
      )}
      <h2>Warm pools</h2>
      <Problem error={pools.error} />
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Template</th>
            <th scope="col">Min</th>
            <th scope="col">Max</th>
            <th scope="col">Starting</th>
            <th scope="col">Ready</th>
            <th scope="col">Hits</th>
            <th scope="col">Misses</th>
            <th scope="col">Tenants</th>
          </tr>
        </thead>
        <tbody>
          {(pools.data ?? []).map((p) => (
            <tr key={p.template}>
              <td>{p.template}</td>
              <td>{p.min}</td>
              <td>{p.max}</td>
              <td>{p.starting}</td>
              <td>{p.ready}</td>
              <td>{p.hits}</td>
              <td>{p.misses}</td>
              <td>{p.tenants?.join(', ') ?? 'any'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {pools.data?.length === 0 && <p>No warm pools.</p>}
      <h2>Templates</h2>
      <Problem error={templates.error} />
      <ul>
        {(templates.data?.templates ?? []).map((t) => (
          <li key={`${t.source}:${t.name}`}>
            <strong>{t.name}</strong>
            {t.image ? ` — ${t.image}` : ''}
            {` (${t.source === 'file' ? 'templates file' : `built ${t.createdAt ?? ''}`.trim()}${t.shadowed ? ', shadowed by the file' : ''})`}
          </li>
        ))}
      </ul>
      {templates.data && (
        <p>Default: {templates.data.default.template ?? templates.data.default.image ?? '—'}</p>
      )}
      <h2>Queues</h2>
      <Problem error={queues.error} />
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Queue</th>
            <th scope="col">Waiting</th>
            <th scope="col">Active</th>
            <th scope="col">Delayed</th>
            <th scope="col">Prioritized</th>
            <th scope="col">Completed</th>
            <th scope="col">Failed</th>
          </tr>
        </thead>
        <tbody>
          {(queues.data ?? []).map((q) => (
            <tr key={q.name}>
              <td>{q.name}</td>
              <td>{q.waiting}</td>
              <td>{q.active}</td>
              <td>{q.delayed}</td>
              <td>{q.prioritized}</td>
              <td>{q.completed}</td>
              <td>{q.failed}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
