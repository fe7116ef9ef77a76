import { useState } from 'preact/hooks';
import { enc, sendJson } from '../api';
import { Problem } from '../components/problem';
import { StateBadge } from '../components/state-badge';
import { age } from '../format';
import type { Me } from '../me';
import { href } from '../router';
import type { Sandbox } from '../types';
import { useLiveList } from '../use-live-list';

/** Labels as `key=value` text, the form the list's label filter takes. */
export function labelText(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}

/** `a=1, b=2` as pairs; an entry without `=` matches nothing (the API refuses it on the list too). */
function labelPairs(text: string): [string, string | undefined][] {
  return text
    .replace(/\s+/g, '')
    .split(',')
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf('=');
      return at <= 0 ? [pair, undefined] : [pair.slice(0, at), pair.slice(at + 1)];
    });
}

/** Live sandboxes the key may see, newest first, kept current by the API's change stream; filter by state and labels. */
export function SandboxesPage({ me }: { me: Me }) {
  const [state, setState] = useState('');
  const [labels, setLabels] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const [creating, setCreating] = useState(false);
  const query = new URLSearchParams({ limit: '200' });
  if (state) query.set('state', state);
  if (labels.trim()) query.set('labels', labels.replace(/\s+/g, ''));
  const wanted = labelPairs(labels);
  const list = useLiveList<Sandbox>(
    {
      kind: 'sandboxes',
      path: `/v1/sandboxes?${query}`,
      keep: (sandbox) =>
        (!state || sandbox.state === state) && wanted.every(([k, v]) => sandbox.labels[k] === v),
      limit: 200,
    },
    [state, labels],
  );
  const now = Date.now();
  const create = async () => {
    setError(undefined);
    setCreating(true);
    try {
      const created = await sendJson<Sandbox>('POST', '/v1/sandboxes', {});
      if (created) location.hash = href('sandboxes', created.id);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setCreating(false);
    }
  };

  return (
    <section aria-labelledby="sandboxes-title">
      <h1 id="sandboxes-title">Sandboxes</h1>
      <div class="actions">
        <button type="button" onClick={create} disabled={creating}>
          {creating ? 'Creating…' : 'New sandbox (default template)'}
        </button>
        <Problem error={error} />
      </div>
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter sandboxes">
        <label>
          State{' '}
          <select value={state} onChange={(e) => setState((e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {['queued', 'creating', 'ready', 'pausing', 'paused', 'closing', 'closed', 'failed'].map((s) => (
              <option value={s} key={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Labels{' '}
          <input
            value={labels}
            placeholder="app=demo,team=x"
            onChange={(e) => setLabels((e.target as HTMLInputElement).value)}
          />
        </label>
      </form>
      <Problem error={list.error} />
      <table class="list">
        <caption class="visually-hidden">Sandboxes, newest first (updates live)</caption>
        <thead>
          <tr>
            <th scope="col">Sandbox</th>
            <th scope="col">State</th>
            {me.admin && <th scope="col">Tenant</th>}
            <th scope="col">Labels</th>
            <th scope="col">Commands running</th>
            <th scope="col">Age</th>
          </tr>
        </thead>
        <tbody>
          {(list.data ?? []).map((sandbox) => (
            <tr key={sandbox.id}>
              <td>
                <a href={href('sandboxes', sandbox.id)}>{sandbox.id}</a>
              </td>
              <td>
                <StateBadge state={sandbox.state} />
              </td>
              {me.admin && <td>{sandbox.tenant}</td>}
              <td>{labelText(sandbox.labels)}</td>
              <td>{sandbox.commandsRunning}</td>
              <td>{age(sandbox.createdAt, now)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data && list.data.length === 0 && <p>No sandboxes.</p>}
    </section>
  );
}

export const sandboxPath = (id: string, rest = '') => `/v1/sandboxes/${enc(id)}${rest}`;
