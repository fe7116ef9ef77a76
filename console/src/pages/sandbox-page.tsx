import { lazy, Suspense } from 'preact/compat';
import { useEffect, useState } from 'preact/hooks';
import { getJson, request, sendJson } from '../api';
import { Problem } from '../components/problem';
import { StateBadge } from '../components/state-badge';
import { age, bytes, clock } from '../format';
import { href } from '../router';
import { followEvents } from '../sse';
import type { HistoryEntry, RestoreResult, Sandbox, Stats } from '../types';
import { usePoll } from '../use-poll';
import { FilesPanel } from './files-panel';
import { PreviewPanel } from './preview-panel';
import { ProcessesPanel } from './processes-panel';
import { RestoreControl } from './restore-control';
import { labelText, sandboxPath } from './sandboxes-page';

// xterm.js is loaded only here, in a chunk of its own (outside the 250 kB budget of the rest).
const TerminalView = lazy(() => import('./terminal-view').then((m) => ({ default: m.TerminalView })));

/** A live sandbox: spec, stats, actions, a terminal, its files, processes and command history. */
export function SandboxPage({ id }: { id: string }) {
  const sandbox = usePoll(() => getJson<Sandbox>(sandboxPath(id)), 5000, [id]);
  const [actionError, setActionError] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const record = sandbox.data;
  // Set as a pause or close goes out: the panels that ask the running sandbox (stats, files,
  // processes, terminal) stop before it is gone rather than poll it into a 409 meanwhile.
  const [leaving, setLeaving] = useState(false);
  const ready = record?.state === 'ready' && !leaving;
  // Once it has left `ready` the record says so itself; a resume (from anywhere) shows them again.
  useEffect(() => {
    if (record && record.state !== 'ready') setLeaving(false);
  }, [record?.state]);

  // Its state changes arrive over SSE; the record is read again on each.
  useEffect(() => {
    const stop = new AbortController();
    void followEvents(sandboxPath(id, '/events'), {
      signal: stop.signal,
      onEvent: (event) => {
        if (event.event === 'state') sandbox.reload();
      },
      isLast: (event) =>
        event.event === 'state' && (JSON.parse(event.data) as { terminal?: boolean }).terminal === true,
    });
    return () => stop.abort();
  }, [id]);

  const act = (label: string, run: () => Promise<string | undefined>) => async () => {
    setActionError(undefined);
    setNotice(undefined);
    setBusy(true);
    try {
      const said = await run();
      setNotice(said ?? `${label}: done`);
      sandbox.reload();
    } catch (err) {
      setActionError(`${label}: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      setBusy(false);
    }
  };
  const close = act('Close', async () => {
    setLeaving(true);
    await request(sandboxPath(id), { method: 'DELETE' });
    return 'Closed';
  });
  // Bumped after a snapshot is taken, so the restore list reads it at once.
  const [snapshots, setSnapshots] = useState(0);
  const snapshot = act('Snapshot', async () => {
    const taken = await sendJson<{ snapshotId: string }>('POST', sandboxPath(id, '/snapshots'), {});
    setSnapshots((n) => n + 1);
    return `Snapshot taken: ${taken?.snapshotId ?? '?'}`;
  });
  const restore = (snapshotId: string) =>
    act('Restore', async () => {
      const done = await sendJson<RestoreResult>('POST', sandboxPath(id, '/restore'), { snapshotId });
      const stopped = done?.stoppedCommands.length ? `; stopped ${done.stoppedCommands.join(', ')}` : '';
      return `Restored ${snapshotId}: ${done?.entries ?? '?'} entries, ${bytes(done?.bytes ?? 0)}${stopped}`;
    })();
  const fork = act('Fork', async () => {
    const forks = await sendJson<{ sandboxIds: string[] }>('POST', sandboxPath(id, '/fork'), { count: 1 });
    return `Forked: ${forks?.sandboxIds.join(', ') ?? '?'}`;
  });
  const pause = act('Pause', async () => {
    setLeaving(true);
    try {
      await sendJson('POST', sandboxPath(id, '/pause'), {});
    } catch (err) {
      setLeaving(false);
      throw err;
    }
    return 'Paused';
  });
  const resume = act('Resume', async () => {
    await sendJson('POST', sandboxPath(id, '/resume'), {});
    return 'Resumed';
  });

  return (
    <section aria-labelledby="sandbox-title">
      <p>
        <a href={href('sandboxes')}>← Sandboxes</a>
      </p>
      <h1 id="sandbox-title">Sandbox {id}</h1>
      <Problem error={sandbox.error} />
      {record && (
        <dl class="facts">
          <dt>State</dt>
          <dd>
            <StateBadge state={record.state} />
            {record.reason ? ` — ${record.reason}` : ''}
            {record.message ? ` (${record.message})` : ''}
          </dd>
          <dt>Tenant</dt>
          <dd>{record.tenant}</dd>
          <dt>Labels</dt>
          <dd>{labelText(record.labels) || '—'}</dd>
          <dt>Created</dt>
          <dd>
            {clock(record.createdAt)} ({age(record.createdAt)})
          </dd>
          <dt>Start</dt>
          <dd>{record.sandbox?.start?.kind ?? '—'}</dd>
          <dt>Ends</dt>
          <dd>{record.endsAt ? clock(record.endsAt) : '—'}</dd>
        </dl>
      )}
      <div class="actions">
        <button type="button" onClick={snapshot} disabled={busy || !ready}>
          Snapshot
        </button>
        <RestoreControl id={id} version={snapshots} disabled={busy || !ready} onRestore={restore} />
        <button type="button" onClick={fork} disabled={busy || !ready}>
          Fork
        </button>
        <button type="button" onClick={pause} disabled={busy || !ready}>
          Pause
        </button>
        <button type="button" onClick={resume} disabled={busy || record?.state !== 'paused'}>
          Resume
        </button>
        <button
          type="button"
          class="danger"
          onClick={close}
          disabled={busy || !record || ['closed', 'failed'].includes(record.state)}
        >
          Close
        </button>
      </div>
      <Problem error={actionError} />
      {notice && (
        <p role="status" class="notice">
          {notice}
        </p>
      )}
      {record && (
        <details>
          <summary>Spec</summary>
          <pre class="spec">{JSON.stringify(record.spec, null, 2)}</pre>
        </details>
      )}
      {ready && <StatsPanel id={id} />}
      {ready && (
        <section aria-labelledby="terminal-title">
          <h2 id="terminal-title">Terminal</h2>
          <Suspense fallback={<p>Loading the terminal…</p>}>
            <TerminalView sandboxId={id} />
          </Suspense>
        </section>
      )}
      {ready && <FilesPanel sandboxId={id} />}
      {ready && <ProcessesPanel sandboxId={id} />}
      {ready && <PreviewPanel sandboxId={id} />}
      {record && <HistoryPanel id={id} />}
    </section>
  );
}

function StatsPanel({ id }: { id: string }) {
  const stats = usePoll(() => getJson<Stats>(sandboxPath(id, '/stats')), 5000, [id]);
  const s = stats.data;
  return (
    <section aria-labelledby="stats-title">
      <h2 id="stats-title">Stats</h2>
      <Problem error={stats.error} />
      {s && (
        <dl class="facts">
          <dt>CPU</dt>
          <dd>{s.cpuSeconds === null ? '—' : `${s.cpuSeconds.toFixed(2)} s`}</dd>
          <dt>Memory</dt>
          <dd>
            {bytes(s.memoryBytes)}
            {s.memoryLimitBytes ? ` of ${bytes(s.memoryLimitBytes)}` : ''}
          </dd>
          <dt>Workspace</dt>
          <dd>
            {bytes(s.workspaceBytes)} in {s.workspaceFiles} files
          </dd>
          <dt>Commands</dt>
          <dd>
            {s.commandsRun} run, {s.commandsRunning} running
          </dd>
        </dl>
      )}
    </section>
  );
}

function HistoryPanel({ id }: { id: string }) {
  const history = usePoll(() => getJson<HistoryEntry[]>(sandboxPath(id, '/history')), 5000, [id]);
  return (
    <section aria-labelledby="history-title">
      <h2 id="history-title">Command history</h2>
      <Problem error={history.error} />
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Command</th>
            <th scope="col">Kind</th>
            <th scope="col">Started</th>
            <th scope="col">Exit code</th>
          </tr>
        </thead>
        <tbody>
          {(history.data ?? [])
            .slice(-50)
            .reverse()
            .map((entry) => (
              <tr key={entry.id}>
                <td>
                  <code>{commandText(entry)}</code>
                </td>
                <td>{entry.terminal ? 'terminal' : entry.kind}</td>
                <td>{clock(entry.startedAt)}</td>
                <td>{entry.result ? (entry.result.exitCode ?? '—') : 'running'}</td>
              </tr>
            ))}
        </tbody>
      </table>
    </section>
  );
}

export function commandText(entry: HistoryEntry): string {
  if (entry.command) return [entry.command, ...(entry.args ?? [])].join(' ');
  return entry.path ? `${entry.kind} ${entry.path}` : entry.kind;
}
