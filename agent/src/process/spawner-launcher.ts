import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { constants as osConstants } from 'node:os';
import type { Logger } from '../logger.js';
import {
  type LaunchRequest,
  type ProcessLauncher,
  type StepProcess,
  type StepProcessEvents,
  validateLaunchRequest,
} from './launcher.js';
import {
  EventType,
  encodeCloseOutput,
  encodeInput,
  encodePauseOutput,
  encodePing,
  encodeResize,
  encodeResumeOutput,
  encodeSpawn,
  FrameReader,
  type SpawnerEvent,
  type TerminalSize,
} from './spawner-protocol.js';

/**
 * Number → name, keeping the first name listed: Node lists SIGABRT before its alias SIGIOT and
 * EAGAIN before EWOULDBLOCK, and the first is the name a reader expects.
 */
function reverse<T extends string>(table: Record<string, number>): Map<number, T> {
  const names = new Map<number, T>();
  for (const [name, number] of Object.entries(table)) if (!names.has(number)) names.set(number, name as T);
  return names;
}
const ERRNO_NAMES = reverse<string>(osConstants.errno);
const SIGNAL_NAMES = reverse<NodeJS.Signals>(osConstants.signals);

/** One running helper process and the step processes it watches. */
interface Helper {
  child: ChildProcess;
  processes: Map<number, SpawnedProcess>;
  /** PINGs waiting for their PONG, by id. */
  pings: Map<number, (answered: boolean) => void>;
  /** Why it is going away, for the error the orphaned steps report. */
  lostBecause: string | null;
}

/**
 * Run steps' processes started by the native helper (agent/native/spawner.c), which the agent
 * starts once and talks to over two pipes: requests on its stdin, the children's output and
 * exits on its stdout. The agent itself never forks for a step.
 *
 * If the helper dies (killed, out of memory), the processes it was watching are reported as
 * ended with an error once everything it wrote has been read, and the next launch starts a new
 * helper.
 */
export class SpawnerLauncher implements ProcessLauncher {
  readonly name = 'spawner';
  private helper: Helper | null = null;
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly helperPath: string,
    private readonly log: Logger,
  ) {}

  /** Starts the helper now rather than at the first step, so a broken one shows up at boot. */
  start(): void {
    this.ensureHelper();
  }

  /**
   * Whether the helper runs here: a PING answered within `timeoutMs`. False when it exits (a
   * runtime that refuses a system call it needs, a binary for another architecture) or stays
   * silent; the agent then runs its steps through child_process instead.
   */
  ready(timeoutMs: number): Promise<boolean> {
    let helper: Helper;
    try {
      helper = this.ensureHelper();
    } catch {
      return Promise.resolve(false);
    }
    const id = this.takeId();
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        // Silent: it may be stuck, and it will never be used; do not leave it behind.
        this.retire(helper, 'did not answer');
        helper.child.kill('SIGKILL');
        answer(false);
      }, timeoutMs);
      const answer = (answered: boolean) => {
        clearTimeout(timer);
        helper.pings.delete(id);
        resolve(answered);
      };
      helper.pings.set(id, answer);
      helper.child.stdin?.write(encodePing(id));
    });
  }

  /** The helper's pid (tests and benchmarks read its memory). */
  get helperPid(): number | undefined {
    return this.helper?.child.pid;
  }

  launch(request: LaunchRequest): StepProcess {
    validateLaunchRequest(request);
    const helper = this.ensureHelper();
    const id = this.takeId();
    const frame = encodeSpawn(id, {
      file: request.file,
      cwd: request.cwd,
      argv: [request.file, ...request.args],
      env: Object.entries(request.env).map(([name, value]) => `${name}=${value}`),
      stdinPath: request.stdinPath,
      terminal: request.terminal,
    });
    const send = (frame: Buffer) => {
      if (helper.lostBecause === null && helper.processes.has(id)) helper.child.stdin?.write(frame);
    };
    const proc = new SpawnedProcess(request, helper.child.pid, () => this.closeOutput(helper, id), {
      input: (data) => send(encodeInput(id, data)),
      resize: (size) => send(encodeResize(id, size)),
      pause: () => send(encodePauseOutput(id)),
      resume: () => send(encodeResumeOutput(id)),
    });
    helper.processes.set(id, proc);
    helper.child.stdin?.write(frame);
    return proc;
  }

  close(): void {
    this.closed = true;
    // Closing its stdin is the helper's signal to exit (after killing what still runs).
    this.helper?.child.stdin?.end();
    this.helper = null;
  }

  private takeId(): number {
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    return id;
  }

  private closeOutput(helper: Helper, id: number): void {
    const proc = helper.processes.get(id);
    if (!proc) return;
    if (proc.exited) helper.processes.delete(id);
    if (helper.lostBecause === null) helper.child.stdin?.write(encodeCloseOutput(id));
  }

  private ensureHelper(): Helper {
    if (this.helper) return this.helper;
    if (this.closed) throw new Error('the spawner was closed');
    const child = spawn(this.helperPath, [], {
      // Its own session: a Ctrl-C meant for the agent's terminal must not reach it; the agent
      // ends it by closing its stdin.
      detached: true,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const helper: Helper = { child, processes: new Map(), pings: new Map(), lostBecause: null };
    const reader = new FrameReader((event) => this.onEvent(helper, event));
    child.stdout?.on('data', (chunk: Buffer) => {
      try {
        reader.push(chunk);
      } catch (err) {
        // The reader ignores everything after this; the helper's steps end through 'close'.
        this.log.error('spawner sent a malformed frame; restarting it', { error: (err as Error).message });
        this.retire(helper, `sent a malformed frame (${(err as Error).message})`);
        child.kill('SIGKILL');
      }
    });
    // An EPIPE on a helper that just died is reported through 'close' below.
    child.stdin?.on('error', () => {});
    child.once('error', (err) => {
      this.log.error('spawner helper could not be started', { path: this.helperPath, error: err.message });
      this.retire(helper, `could not be started: ${err.message}`);
    });
    child.once('exit', (code, signal) => {
      if (this.closed) return;
      this.log.error('spawner helper exited', { code, signal });
      this.retire(helper, `exited (${signal ?? `code ${code}`})`);
    });
    // 'close' comes after the last of its stdout was read: exits it reported before dying
    // have reached their steps by then, and only the rest are orphans.
    child.once('close', () => {
      for (const answer of [...helper.pings.values()]) answer(false);
      if (this.closed) return;
      this.retire(helper, 'exited');
      const orphans = [...helper.processes.values()];
      helper.processes.clear();
      for (const proc of orphans) proc.helperLost(`the spawner helper ${helper.lostBecause}`);
    });
    this.helper = helper;
    return helper;
  }

  /** Stops using a helper for new launches; the first reason given is the one reported. */
  private retire(helper: Helper, why: string): void {
    helper.lostBecause ??= why;
    if (this.helper === helper) this.helper = null;
  }

  private onEvent(helper: Helper, event: SpawnerEvent): void {
    if (event.type === EventType.pong) {
      helper.pings.get(event.id)?.(true);
      return;
    }
    const proc = helper.processes.get(event.id);
    // Output of a process whose output the step already gave up on.
    if (!proc) return;
    try {
      dispatch(proc, event);
    } catch (err) {
      if (err instanceof UnknownEventError) throw err;
      // A step's own listener threw: that is the step's bug, not a broken helper, and the other
      // steps' processes must go on being watched.
      this.log.error('a run step listener threw', { error: (err as Error).message });
    }
    if (proc.closed) helper.processes.delete(event.id);
  }
}

class UnknownEventError extends Error {}

/** Terminal input per INPUT frame: keystrokes are small, a paste is cut up. */
const INPUT_FRAME_BYTES = 64 * 1024;

function dispatch(proc: SpawnedProcess, event: SpawnerEvent): void {
  switch (event.type) {
    case EventType.spawned:
      proc.spawned(event.payload.readInt32LE(0));
      return;
    case EventType.spawnFailed:
      proc.failed(event.payload.readInt32LE(0));
      return;
    case EventType.stdout:
      proc.output('stdout', event.payload);
      return;
    case EventType.stderr:
      proc.output('stderr', event.payload);
      return;
    case EventType.stdoutEnd:
      proc.streamEnded(0);
      return;
    case EventType.stderrEnd:
      proc.streamEnded(1);
      return;
    case EventType.exit:
      proc.exitedWith(event.payload.readInt32LE(0));
      return;
    default:
      throw new UnknownEventError(`spawner sent an unknown event type ${event.type}`);
  }
}

class SpawnedProcess extends EventEmitter<StepProcessEvents> implements StepProcess {
  pid: number | undefined = undefined;
  exited = false;
  closed = false;
  private readonly open = [true, true];
  /** Set by closeOutput: output still in flight from the helper is dropped, as after destroy(). */
  private outputClosed = false;

  constructor(
    private readonly request: LaunchRequest,
    /** The helper, a child subreaper: what the process leaves behind is re-parented to it. */
    readonly reaper: number | undefined,
    private readonly requestCloseOutput: () => void,
    private readonly requests: {
      input(data: Buffer): void;
      resize(size: TerminalSize): void;
      pause(): void;
      resume(): void;
    },
  ) {
    super();
  }

  pauseOutput(): void {
    if (!this.outputClosed && !this.closed) this.requests.pause();
  }

  resumeOutput(): void {
    if (!this.outputClosed && !this.closed) this.requests.resume();
  }

  writeInput(data: Buffer): void {
    if (!this.request.terminal || this.exited || this.outputClosed) return;
    // The helper takes at most a frame's worth at a time; larger input goes in pieces.
    for (let at = 0; at < data.length; at += INPUT_FRAME_BYTES) {
      this.requests.input(data.subarray(at, at + INPUT_FRAME_BYTES));
    }
  }

  resize(size: TerminalSize): void {
    if (this.request.terminal && !this.exited && !this.outputClosed) this.requests.resize(size);
  }

  spawned(pid: number): void {
    this.pid = pid;
    this.emit('spawn');
  }

  /** The error Node's spawn raises for the same errno, file and arguments. */
  failed(errno: number): void {
    const code = ERRNO_NAMES.get(errno) ?? `errno ${errno}`;
    const err: NodeJS.ErrnoException & { spawnargs?: string[] } = new Error(
      `spawn ${this.request.file} ${code}`,
    );
    err.code = code;
    err.errno = -errno;
    err.syscall = `spawn ${this.request.file}`;
    err.path = this.request.file;
    err.spawnargs = [...this.request.args];
    this.closed = true;
    this.emit('error', err);
    this.emit('close');
  }

  output(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    if (!this.outputClosed) this.emit(stream, chunk);
  }

  streamEnded(stream: 0 | 1): void {
    this.open[stream] = false;
    this.closeIfDone();
  }

  exitedWith(status: number): void {
    this.exited = true;
    // The raw wait status: low 7 bits are the terminating signal, 0 for a normal exit.
    const signalNumber = status & 0x7f;
    if (signalNumber === 0) this.emit('exit', (status >> 8) & 0xff, null);
    else this.emit('exit', null, SIGNAL_NAMES.get(signalNumber) ?? null);
    this.closeIfDone();
  }

  /**
   * The helper died. Before 'spawn' that is a failure to start; afterwards an 'error' tells the
   * step that nobody watches its process any more (the step kills its group and reports it).
   */
  helperLost(why: string): void {
    if (this.closed) return;
    const err: NodeJS.ErrnoException = new Error(why);
    err.code = 'ESPAWNER';
    this.exited = true;
    this.open[0] = false;
    this.open[1] = false;
    this.closed = true;
    this.emit('error', err);
    this.emit('close');
  }

  closeOutput(): void {
    if (this.closed || this.outputClosed) return;
    this.outputClosed = true;
    this.open[0] = false;
    this.open[1] = false;
    this.requestCloseOutput();
    this.closeIfDone();
  }

  private closeIfDone(): void {
    if (this.exited && !this.open[0] && !this.open[1]) this.close();
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.emit('close');
  }
}
