import { PassThrough, Readable } from 'node:stream';
import {
  type CommandStep,
  type LiveSandboxSpec,
  type LiveSandboxSpecInput,
  type SandboxRecord,
  sleep,
} from '@sandstream/bus';
import type { FileEntry, GrepMatch, NetworkPolicy } from '@sandstream/wire';
import type { CommandOutputLine, ExecResult } from '../command-output.js';
import type { RunCommandOptions } from '../command-runner.js';
import { followBackoffMs } from '../follow-backoff.js';
import { SandboxCommandNotFoundError } from '../sandbox-errors.js';
import type { CommandHistoryEntry, SandboxStats } from '../sandbox-history.js';
import type {
  CreateSandboxOptions,
  GrepOptions,
  ListSandboxesOptions,
  TerminalOptions,
} from '../sandbox-options.js';
import type { PauseResult } from '../sandbox-pause-result.js';
import type { PortUrlRequest } from '../sandbox-ports.js';
import type { OutputGap } from '../seq-gaps.js';
import type { RestoreResult, SnapshotInfo } from '../snapshots.js';
import type {
  CodeCommand,
  KillSignal,
  RunStep,
  SandboxEndsAt,
  SandboxTransport,
  TerminalChannel,
} from '../transport.js';
import { type HttpApi, isPassingOutage } from './http-api.js';
import { followCodeEvents } from './http-code-events.js';
import { followCommandEvents } from './http-command-events.js';
import { HttpTerminalChannel } from './http-terminal-channel.js';

/** How long POST /v1/sandboxes may wait for readiness when the caller set no bound (the API's own cap). */
const CREATE_WAIT_SECONDS = 3600;
/** The API's wait bound for a caller's own (none: the API's cap). */
function waitSecondsOf(options: CreateSandboxOptions): number {
  return Math.max(1, Math.min(Math.ceil(options.timeoutSeconds ?? CREATE_WAIT_SECONDS), CREATE_WAIT_SECONDS));
}

/**
 * How long a command whose stream was cut is tried again without reaching the API before the
 * run gives up with the last error: a replica's restart, a rolling update, a Redis restart.
 */
const RESUME_OUTAGE_LIMIT_MS = 60_000;

/**
 * Live sandboxes over the HTTP API (services/api): one request per call, a command's output as
 * server-sent events, file trees as tar request and response bodies, a terminal as a WebSocket.
 */
export class HttpSandboxTransport implements SandboxTransport {
  /** Open terminal sockets, closed with the client. */
  private readonly terminals = new Set<HttpTerminalChannel>();

  constructor(private readonly api: HttpApi) {}

  /** Over HTTP the API key decides whose sandboxes a caller reaches. */
  forTenant(_tenant: string): HttpSandboxTransport {
    return this;
  }

  closeTerminals(): void {
    for (const terminal of this.terminals) terminal.terminate();
    this.terminals.clear();
  }

  async portUrl(id: string, port: number, options: PortUrlRequest): Promise<string> {
    const query = new URLSearchParams({ form: options.form, ...(options.public ? { public: 'true' } : {}) });
    const answer = await this.api.json<{ url: string }>(this.path(id, `/ports/${port}/url?${query}`), {
      subject: { sandboxId: id },
    });
    return answer.url;
  }

  updateNetwork(id: string, network: NetworkPolicy): Promise<NetworkPolicy> {
    return this.api.json<NetworkPolicy>(this.path(id, '/network'), {
      method: 'PUT',
      body: network,
      subject: { sandboxId: id },
    });
  }

  private path(id: string, rest = ''): string {
    return `/v1/sandboxes/${encodeURIComponent(id)}${rest}`;
  }

  async create(_spec: LiveSandboxSpec, input: LiveSandboxSpecInput, options: CreateSandboxOptions) {
    // The spec as given (validated already): the API fills in the tenant of the key, not `default`.
    const record = await this.api.json<SandboxRecord>('/v1/sandboxes', {
      method: 'POST',
      body: input,
      query: {
        wait: options.wait === false ? false : undefined,
        timeoutSeconds: waitSecondsOf(options),
      },
      signal: options.signal,
      subject: { spec: 'sandbox', ...(input.id !== undefined ? { sandboxId: input.id } : {}) },
    });
    return { id: record.id, record };
  }

  snapshot(
    id: string,
    options: { name?: string | undefined; timeoutSeconds?: number | undefined },
  ): Promise<SnapshotInfo> {
    return this.api.json<SnapshotInfo>(this.path(id, '/snapshots'), {
      method: 'POST',
      body: { ...(options.name ? { name: options.name } : {}) },
      subject: { sandboxId: id },
    });
  }

  restore(id: string, snapshotId: string): Promise<RestoreResult> {
    return this.api.json<RestoreResult>(this.path(id, '/restore'), {
      method: 'POST',
      body: { snapshotId },
      subject: { sandboxId: id, snapshotId },
    });
  }

  async fork(id: string, count: number): Promise<string[]> {
    const forked = await this.api.json<{ sandboxIds: string[] }>(this.path(id, '/fork'), {
      method: 'POST',
      body: { count },
      subject: { sandboxId: id },
    });
    return forked.sandboxIds;
  }

  listSnapshots(): Promise<SnapshotInfo[]> {
    return this.api.json<SnapshotInfo[]>('/v1/snapshots');
  }

  getSnapshot(snapshotId: string): Promise<SnapshotInfo | null> {
    return this.api.jsonOrNull<SnapshotInfo>(`/v1/snapshots/${encodeURIComponent(snapshotId)}`, {
      subject: { snapshotId },
    });
  }

  async deleteSnapshot(snapshotId: string): Promise<boolean> {
    const response = await this.api.request(`/v1/snapshots/${encodeURIComponent(snapshotId)}`, {
      method: 'DELETE',
      subject: { snapshotId },
      allow: [404],
    });
    await response.body?.cancel();
    return response.status !== 404;
  }

  async connect(id: string, options: CreateSandboxOptions): Promise<void> {
    // The API waits by event (the sandbox's ready entry) and keeps it from idling in one request.
    const response = await this.api.request(this.path(id, '/connect'), {
      method: 'POST',
      query: { timeoutSeconds: waitSecondsOf(options) },
      signal: options.signal,
      subject: { sandboxId: id },
    });
    await response.body?.cancel();
  }

  async get(id: string): Promise<SandboxRecord | null> {
    return this.api.jsonOrNull<SandboxRecord>(this.path(id), { subject: { sandboxId: id } });
  }

  list(options: ListSandboxesOptions): Promise<SandboxRecord[]> {
    const labels = Object.entries(options.labels ?? {}).map(([k, v]) => `${k}=${v}`);
    return this.api.json<SandboxRecord[]>('/v1/sandboxes', {
      query: {
        state: options.state,
        tenant: options.tenant,
        labels: labels.length > 0 ? labels.join(',') : undefined,
        limit: options.limit,
      },
    });
  }

  close(id: string): Promise<SandboxRecord> {
    return this.api.json<SandboxRecord>(this.path(id), { method: 'DELETE', subject: { sandboxId: id } });
  }

  pause(id: string): Promise<PauseResult> {
    return this.api.json<PauseResult>(this.path(id, '/pause'), {
      method: 'POST',
      body: {},
      subject: { sandboxId: id },
    });
  }

  resume(id: string, options: CreateSandboxOptions): Promise<SandboxRecord> {
    return this.api.json<SandboxRecord>(this.path(id, '/resume'), {
      method: 'POST',
      query: {
        wait: options.wait === false ? false : undefined,
        timeoutSeconds: waitSecondsOf(options),
      },
      signal: options.signal,
      subject: { sandboxId: id },
    });
  }

  async keepAlive(id: string): Promise<void> {
    await this.api.request(this.path(id, '/keepalive'), { method: 'POST', subject: { sandboxId: id } });
  }

  setTimeout(id: string, seconds: number): Promise<SandboxEndsAt> {
    return this.api.json(this.path(id, '/timeout'), {
      method: 'POST',
      body: { timeoutSeconds: seconds },
      subject: { sandboxId: id },
    });
  }

  history(id: string): Promise<CommandHistoryEntry[]> {
    return this.api.json(this.path(id, '/history'), { subject: { sandboxId: id } });
  }

  stats(id: string): Promise<SandboxStats> {
    return this.api.json(this.path(id, '/stats'), { subject: { sandboxId: id } });
  }

  /**
   * Runs a command over POST …/exec as an event stream. Once its `started` event told the
   * command's id, a stream that breaks off (the replica killed, a proxy cut it) is not the
   * command's end: it is followed again by id (GET …/processes/{id}/output) on whichever
   * replica answers the same URL next, each line handed on once (by its seq), up to its real
   * result. Cut before `started`, nothing says whether the command was taken: that throws.
   */
  async run(id: string, step: RunStep, options: RunCommandOptions): Promise<ExecResult> {
    const subject = { sandboxId: id };
    let commandId: string | undefined;
    const once = handedOnOnce(options);
    try {
      const events = this.api.events(this.path(id, '/exec'), {
        method: 'POST',
        body: execBodyOf(step, options.maxOutputBytes),
        subject,
      });
      const onStart = (started: string) => {
        commandId = started;
        options.onStart?.(started);
      };
      return await followCommandEvents(events, { ...once, onStart }, subject);
    } catch (err) {
      if (commandId === undefined || !isPassingOutage(err)) throw err;
      return await this.followAgain(id, commandId, once, err);
    }
  }

  /** Runs a code cell over POST …/code as an event stream (http-code-events.ts). */
  runCode(id: string, step: CodeCommand, options: RunCommandOptions) {
    const subject = { sandboxId: id };
    const events = this.api.events(this.path(id, '/code'), {
      method: 'POST',
      body: {
        code: step.code,
        ...(step.language !== undefined ? { language: step.language } : {}),
        ...(step.context !== undefined ? { context: step.context } : {}),
        ...(step.workingDirectory ? { cwd: step.workingDirectory } : {}),
        ...(step.timeoutSeconds ? { timeoutSeconds: step.timeoutSeconds } : {}),
      },
      subject,
    });
    return followCodeEvents(events, options, subject);
  }

  /** Follows a command whose stream was cut (`cut`) to its result, through whichever replica answers. */
  private async followAgain(
    id: string,
    commandId: string,
    options: RunCommandOptions,
    cut: unknown,
  ): Promise<ExecResult> {
    const subject = { sandboxId: id };
    let outageSince = Date.now();
    let last = cut;
    for (let failures = 1; Date.now() - outageSince < RESUME_OUTAGE_LIMIT_MS; failures++) {
      await sleep(followBackoffMs(failures), options.stopFollowing);
      try {
        const events = this.api.events(this.path(id, `/processes/${encodeURIComponent(commandId)}/output`), {
          subject,
          signal: options.stopFollowing,
        });
        // Reached: a later cut starts its own count.
        return await followCommandEvents(
          (async function* () {
            for await (const event of events) {
              outageSince = Date.now();
              yield event;
            }
          })(),
          options,
          subject,
        );
      } catch (err) {
        if (options.stopFollowing?.aborted || !isPassingOutage(err)) throw err;
        last = err;
      }
    }
    throw last;
  }

  /** Follows a command by id; a stream cut on the way is followed again as run() does. */
  async attach(id: string, commandId: string, options: RunCommandOptions): Promise<ExecResult> {
    const once = handedOnOnce(options);
    try {
      const subject = { sandboxId: id };
      const events = this.api.events(this.path(id, `/processes/${encodeURIComponent(commandId)}/output`), {
        subject,
        // Dropping the connection is how a follower goes away over HTTP; the command goes on.
        signal: options.stopFollowing,
      });
      return await followCommandEvents(events, once, subject);
    } catch (err) {
      if (options.stopFollowing?.aborted || !isPassingOutage(err)) throw err;
      return await this.followAgain(id, commandId, once, err);
    }
  }

  async cancel(id: string, commandId: string, _reason: string, signal?: KillSignal): Promise<void> {
    // Any command is cancelled by killing its tree; the processes route takes the signal.
    const subject = { sandboxId: id };
    const response = await this.api.request(this.path(id, `/processes/${encodeURIComponent(commandId)}`), {
      method: 'DELETE',
      query: { signal },
      subject,
      allow: [404],
    });
    if (response.status !== 404) {
      await response.body?.cancel();
      return;
    }
    // The route answers 404 for a command that already ended (or never was): the SDK's cancel
    // leaves a finished command as it is, as over Redis. A missing sandbox still throws.
    const refusal = await this.api.refusal(response, subject);
    if (!(refusal instanceof SandboxCommandNotFoundError)) throw refusal;
  }

  async startProcess(id: string, step: Extract<CommandStep, { kind?: 'run' }>): Promise<string> {
    const started = await this.api.json<{ id: string }>(this.path(id, '/processes'), {
      method: 'POST',
      body: {
        command: [step.command, ...(step.args ?? [])],
        shell: step.shell,
        ...(step.workingDirectory ? { cwd: step.workingDirectory } : {}),
        ...(step.env ? { env: step.env } : {}),
        ...(step.timeoutSeconds !== undefined ? { timeoutSeconds: step.timeoutSeconds } : {}),
      },
      subject: { sandboxId: id },
    });
    return started.id;
  }

  async readFile(id: string, path: string): Promise<string> {
    const response = await this.api.request(this.path(id, '/fs'), {
      query: { path },
      subject: { sandboxId: id },
    });
    return response.text();
  }

  async writeFile(
    id: string,
    path: string,
    content: string | Uint8Array,
    mode: number | undefined,
  ): Promise<number> {
    const written = await this.api.json<{ bytesWritten: number }>(this.path(id, '/fs'), {
      method: 'PUT',
      query: { path, mode: mode === undefined ? undefined : mode.toString(8).padStart(3, '0') },
      body: content,
      contentType: typeof content === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream',
      subject: { sandboxId: id },
      expectContinue: true,
    });
    return written.bytesWritten;
  }

  listFiles(
    id: string,
    path: string,
    options: { maxDepth: number; maxEntries: number },
  ): Promise<{ entries: FileEntry[]; truncated: boolean }> {
    return this.api.json(this.path(id, '/ls'), { query: { path, ...options }, subject: { sandboxId: id } });
  }

  grep(
    id: string,
    pattern: string,
    options: GrepOptions,
  ): Promise<{ matches: GrepMatch[]; truncated: boolean }> {
    return this.api.json(this.path(id, '/grep'), {
      query: { pattern, ...options },
      subject: { sandboxId: id },
    });
  }

  upload(id: string, tar: Readable, remoteDir: string, maxBytes: number | undefined) {
    return this.api.json<{ bytes: number; files: number }>(this.path(id, '/archive'), {
      method: 'POST',
      query: { path: remoteDir, maxBytes },
      body: tar,
      contentType: 'application/x-tar',
      subject: { sandboxId: id },
    });
  }

  download(id: string, remotePath: string, maxBytes: number | undefined): Readable {
    const out = new PassThrough();
    const controller = new AbortController();
    out.once('close', () => controller.abort());
    void (async () => {
      try {
        const response = await this.api.request(this.path(id, '/archive'), {
          query: { path: remotePath, maxBytes },
          signal: controller.signal,
          subject: { sandboxId: id },
        });
        if (!response.body) throw new Error('the API answered a download with no body');
        // Back-pressure end to end: a slow reader here slows the socket, the API, the agent.
        Readable.fromWeb(response.body as Parameters<typeof Readable.fromWeb>[0])
          .on('error', (err) => out.destroy(err))
          .pipe(out);
      } catch (err) {
        out.destroy(err as Error);
      }
    })();
    return out;
  }

  /** A watch over POST …/watch, followed as a command's events (services/api watch-directory.ts). */
  async watch(
    id: string,
    step: Extract<CommandStep, { kind: 'watch' }>,
    options: RunCommandOptions,
  ): Promise<ExecResult> {
    const subject = { sandboxId: id };
    const events = this.api.events(this.path(id, '/watch'), {
      method: 'POST',
      body: {
        path: step.path,
        ...(step.recursive !== undefined ? { recursive: step.recursive } : {}),
        ...(step.timeoutSeconds !== undefined ? { timeoutSeconds: step.timeoutSeconds } : {}),
      },
      subject,
    });
    return followCommandEvents(events, options, subject);
  }

  async writeStdin(id: string, commandId: string, data: Buffer): Promise<void> {
    await this.api.request(this.path(id, `/processes/${encodeURIComponent(commandId)}/stdin`), {
      method: 'POST',
      body: data,
      subject: { sandboxId: id, commandId },
    });
  }

  async closeStdin(id: string, commandId: string): Promise<void> {
    await this.api.request(this.path(id, `/processes/${encodeURIComponent(commandId)}/stdin`), {
      method: 'DELETE',
      subject: { sandboxId: id, commandId },
    });
  }

  async openTerminal(id: string, options: TerminalOptions): Promise<TerminalChannel> {
    return this.track(
      await HttpTerminalChannel.open(
        this.api,
        id,
        {
          cols: options.cols,
          rows: options.rows,
          command: options.command,
          env: options.env ? Object.entries(options.env).map(([k, v]) => `${k}=${v}`) : undefined,
          cwd: options.cwd,
          timeoutSeconds: options.timeoutSeconds,
        },
        (commandId, runOptions) => this.attach(id, commandId, runOptions),
      ),
    );
  }

  async attachTerminal(id: string, commandId: string): Promise<TerminalChannel> {
    return this.track(
      await HttpTerminalChannel.open(this.api, id, { attach: commandId }, (command, runOptions) =>
        this.attach(id, command, runOptions),
      ),
    );
  }

  private track(channel: HttpTerminalChannel): HttpTerminalChannel {
    this.terminals.add(channel);
    channel.onEnd(() => this.terminals.delete(channel));
    return channel;
  }
}

/** An exec request body (services/api ExecBody) for a run or shell step. */
function execBodyOf(step: RunStep, maxOutputBytes: number | undefined): Record<string, unknown> {
  const common = {
    ...(step.timeoutSeconds !== undefined ? { timeoutSeconds: step.timeoutSeconds } : {}),
    ...(maxOutputBytes !== undefined ? { maxOutputBytes } : {}),
  };
  if (step.kind === 'shell') return { command: step.command, session: step.session, ...common };
  return {
    command: [step.command, ...(step.args ?? [])],
    shell: step.shell,
    ...(step.workingDirectory ? { cwd: step.workingDirectory } : {}),
    ...(step.env ? { env: step.env } : {}),
    ...(step.stdin !== undefined ? { stdin: step.stdin } : {}),
    ...(step.stdinEncoding !== undefined ? { stdinEncoding: step.stdinEncoding } : {}),
    ...(step.stdinStream ? { openStdin: true } : {}),
    ...common,
  };
}

/**
 * `options` whose line and gap callbacks let through only what is past the last line already
 * handed on: a command followed again after a cut stream is replayed from the start of what the
 * stream holds, and its caller must see each line once.
 */
function handedOnOnce(options: RunCommandOptions): RunCommandOptions {
  let last = 0;
  return {
    ...options,
    onLine: (line: CommandOutputLine) => {
      if (line.seq <= last) return;
      last = line.seq;
      options.onLine?.(line);
    },
    onGap: (gap: OutputGap) => {
      if (gap.to <= last) return;
      const from = Math.max(gap.from, last + 1);
      last = gap.to;
      options.onGap?.({ from, to: gap.to });
    },
  };
}
