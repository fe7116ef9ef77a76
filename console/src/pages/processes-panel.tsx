import { useEffect, useState } from 'preact/hooks';
import { enc, getJson, request } from '../api';
import { Problem } from '../components/problem';
import { clock } from '../format';
import { followEvents } from '../sse';
import type { HistoryEntry } from '../types';
import { usePoll } from '../use-poll';
import { commandText } from './sandbox-page';
import { sandboxPath } from './sandboxes-page';

/** Background processes still running: follow one's output (SSE), kill one. */
export function ProcessesPanel({ sandboxId }: { sandboxId: string }) {
  const list = usePoll(() => getJson<HistoryEntry[]>(sandboxPath(sandboxId, '/processes')), 3000, [
    sandboxId,
  ]);
  const [following, setFollowing] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const kill = (pid: string) => async () => {
    setError(undefined);
    try {
      await request(sandboxPath(sandboxId, `/processes/${enc(pid)}`), { method: 'DELETE' });
      list.reload();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  const processes = (list.data ?? []).filter((p) => !p.terminal);
  return (
    <section aria-labelledby="processes-title">
      <h2 id="processes-title">Background processes</h2>
      <Problem error={list.error ?? error} />
      {processes.length === 0 ? (
        <p>None running.</p>
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th scope="col">Process</th>
              <th scope="col">Command</th>
              <th scope="col">Started</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {processes.map((p) => (
              <tr key={p.id}>
                <td>{p.id}</td>
                <td>
                  <code>{commandText(p)}</code>
                </td>
                <td>{clock(p.startedAt)}</td>
                <td>
                  <button type="button" onClick={() => setFollowing(p.id)}>
                    Follow
                  </button>{' '}
                  <button type="button" class="danger" onClick={kill(p.id)}>
                    Kill
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {following && <ProcessOutput sandboxId={sandboxId} processId={following} />}
    </section>
  );
}

function ProcessOutput({ sandboxId, processId }: { sandboxId: string; processId: string }) {
  const [lines, setLines] = useState<string[]>([]);
  useEffect(() => {
    const stop = new AbortController();
    setLines([]);
    void followEvents(sandboxPath(sandboxId, `/processes/${enc(processId)}/output`), {
      signal: stop.signal,
      onEvent: (event) => {
        const data = JSON.parse(event.data) as {
          line?: string;
          from?: number;
          to?: number;
          exitCode?: number;
        };
        if (event.event === 'stdout' || event.event === 'stderr') setLines((l) => l.concat(data.line ?? ''));
        else if (event.event === 'gap')
          setLines((l) => l.concat(`… ${(data.to ?? 0) - (data.from ?? 0)} lines not shown …`));
        else if (event.event === 'result') setLines((l) => l.concat(`[exited ${data.exitCode ?? '—'}]`));
      },
      isLast: (event) => event.event === 'result',
    });
    return () => stop.abort();
  }, [sandboxId, processId]);
  return (
    <figure>
      <figcaption>Output of {processId}</figcaption>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: the log scrolls, so the keyboard must reach it */}
      <pre class="output" tabIndex={0}>
        {lines.join('\n')}
      </pre>
    </figure>
  );
}
