import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { sseEvents } from './api-client.js';

// An exec belongs to its request: a client that goes away before the end cancels the command,
// as an aborted SDK call does. The API turns the request's going away into an abort of its own
// SDK call, and the SDK (Sandbox.execution, the one place) turns that abort into the cancel.

let s: ApiStack;
let key: string;
/**
 * The sandboxes the tests made, closed at the end: a live sandbox stays until it is closed or
 * idles out, and an in-process one's agent outlives the stack's services (their stop waits for
 * queued destroys only).
 */
const made: string[] = [];

interface HistoryEntry {
  id: string;
  command?: string;
  result?: { cancelled?: boolean; exitCode: number | null };
}

beforeAll(async () => {
  s = await startApiStack({ label: 'api-exec-gone' });
  key = (await s.key('acme')).key;
}, 120_000);

afterAll(async () => {
  for (const id of made) await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key });
  await s?.stop();
}, 60_000);

async function history(id: string): Promise<HistoryEntry[]> {
  const res = await s.request(`/v1/sandboxes/${id}/history`, { key });
  return (await res.json()) as HistoryEntry[];
}

/** Waits (polling the history, the only place a finished command's end is told) for `check`. */
async function untilHistory(
  id: string,
  what: string,
  check: (h: HistoryEntry[]) => boolean,
): Promise<HistoryEntry[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const entries = await history(id);
    if (check(entries)) return entries;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(entries)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function sandbox(): Promise<string> {
  const id = await s.createSandbox(key);
  made.push(id);
  return id;
}

function exec(id: string, command: string, signal: AbortSignal, stream: boolean): Promise<Response> {
  return s.request(`/v1/sandboxes/${id}/exec`, {
    method: 'POST',
    key,
    signal,
    headers: { 'content-type': 'application/json', ...(stream ? { accept: 'text/event-stream' } : {}) },
    body: JSON.stringify({ command }),
  });
}

describe('an exec whose client goes away', () => {
  it('as an event stream: the command is cancelled once the stream is dropped', async () => {
    const id = await sandbox();
    const gone = new AbortController();
    const res = await exec(id, 'sleep 60', gone.signal, true);
    let commandId: string | undefined;
    for await (const e of sseEvents(res)) {
      if (e.event === 'started') {
        commandId = (e.data as { commandId: string }).commandId;
        break;
      }
    }
    expect(commandId).toBeDefined();
    gone.abort();
    const entries = await untilHistory(id, 'the cancelled result', (h) =>
      h.some((e) => e.id === commandId && e.result !== undefined),
    );
    expect(entries.find((e) => e.id === commandId)?.result).toMatchObject({ cancelled: true });
  }, 90_000);

  it('as one JSON answer: the command is cancelled once the request is dropped', async () => {
    const id = await sandbox();
    const gone = new AbortController();
    const answer = exec(id, 'sleep 61', gone.signal, false).catch((err: unknown) => err);
    const [running] = await untilHistory(id, 'the command to be taken', (h) =>
      h.some((e) => e.command === 'sleep 61'),
    ).then((h) => h.filter((e) => e.command === 'sleep 61'));
    gone.abort();
    expect(await answer).toBeInstanceOf(Error);
    const entries = await untilHistory(id, 'the cancelled result', (h) =>
      h.some((e) => e.id === running?.id && e.result !== undefined),
    );
    expect(entries.find((e) => e.id === running?.id)?.result).toMatchObject({ cancelled: true });
  }, 90_000);
});
