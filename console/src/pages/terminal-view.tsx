import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson } from '../api';
import { sandboxPath } from './sandboxes-page';

/** A one-use ticket for one WebSocket URL: a browser cannot put the key on a WebSocket. */
async function shellUrl(sandboxId: string, cols: number, rows: number): Promise<string> {
  const { ticket } = await getJson<{ ticket: string }>('/v1/auth/ws-ticket', { method: 'POST' });
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const query = new URLSearchParams({ ticket, cols: String(cols), rows: String(rows) });
  return `${scheme}://${location.host}${sandboxPath(sandboxId, '/shell')}?${query}`;
}

/**
 * An interactive shell in the sandbox (the API's shell WebSocket on a PTY): one shell for the
 * page's life, so `cd` persists; keystrokes (Ctrl-C too) go as input frames, the window's size
 * as resize frames; output arrives as binary frames.
 */
export function TerminalView({ sandboxId }: { sandboxId: string }) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('connecting');

  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const term = new Terminal({
      convertEol: false,
      cursorBlink: true,
      fontFamily: 'ui-monospace, monospace',
      fontSize: 14,
      screenReaderMode: true,
      theme: { background: '#111418', foreground: '#e8e8e8' },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(element);
    fit.fit();
    let socket: WebSocket | undefined;
    let closed = false;
    const send = (message: unknown) => {
      if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
    };
    const input = term.onData((data) => send({ type: 'input', data }));
    const resize = term.onResize(({ cols, rows }) => send({ type: 'resize', cols, rows }));
    const observer = new ResizeObserver(() => fit.fit());
    observer.observe(element);

    shellUrl(sandboxId, term.cols, term.rows)
      .then((url) => {
        if (closed) return;
        socket = new WebSocket(url);
        socket.binaryType = 'arraybuffer';
        socket.onopen = () => setStatus('connected');
        socket.onmessage = (event) => {
          if (event.data instanceof ArrayBuffer) {
            term.write(new Uint8Array(event.data));
            return;
          }
          const message = JSON.parse(String(event.data)) as {
            type: string;
            exitCode?: number;
            problem?: { detail?: string };
          };
          if (message.type === 'exit') setStatus(`shell ended (exit ${message.exitCode ?? '—'})`);
          else if (message.type === 'error') setStatus(`error: ${message.problem?.detail ?? 'unknown'}`);
        };
        socket.onclose = () => setStatus((s) => (s === 'connected' ? 'disconnected' : s));
        term.focus();
      })
      .catch((err: unknown) =>
        setStatus(`could not open the shell: ${err instanceof Error ? err.message : String(err)}`),
      );

    return () => {
      closed = true;
      observer.disconnect();
      input.dispose();
      resize.dispose();
      socket?.close();
      term.dispose();
    };
  }, [sandboxId]);

  return (
    <div>
      <p class="stream-status" aria-live="polite">
        terminal: {status}
      </p>
      <div
        class="terminal"
        ref={host}
        data-testid="terminal"
        aria-label="Sandbox terminal"
        role="application"
      />
    </div>
  );
}
