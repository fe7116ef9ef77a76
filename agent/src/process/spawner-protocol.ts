/**
 * The frames the agent and the native spawner (agent/native/spawner.c) exchange over the
 * helper's stdin and stdout. Both ways a frame is
 *
 *   u32 length (of what follows, little-endian)   u8 type   u32 id   payload
 *
 * and a string inside a payload is a u32 byte length followed by its UTF-8 bytes.
 */
export const RequestType = {
  spawn: 1,
  closeOutput: 2,
  ping: 3,
  spawnTty: 4,
  input: 5,
  resize: 6,
  pauseOutput: 7,
  resumeOutput: 8,
} as const;

export const EventType = {
  spawned: 1,
  spawnFailed: 2,
  stdout: 3,
  stderr: 4,
  stdoutEnd: 5,
  stderrEnd: 6,
  exit: 7,
  pong: 8,
} as const;
export type EventTypeCode = (typeof EventType)[keyof typeof EventType];

const HEADER_BYTES = 9;
/** The helper refuses requests over this size (argv + environment). */
export const MAX_REQUEST_BYTES = 16 * 1024 * 1024;
/** The helper relays output in frames of at most 64 KiB; anything longer is a corrupt stream. */
export const MAX_EVENT_FRAME_BYTES = 64 * 1024;

export interface SpawnRequestFields {
  file: string;
  cwd: string;
  /** argv[0] first. */
  argv: readonly string[];
  /** "NAME=value" entries. */
  env: readonly string[];
  /** A file the child reads as stdin (absent: /dev/null). Sent after env, so older helpers' frames stay valid. */
  stdinPath?: string | undefined;
  /** Run it on a pseudo-terminal of this size instead of pipes (SPAWN_TTY; no stdinPath). */
  terminal?: TerminalSize | undefined;
}

export interface TerminalSize {
  cols: number;
  rows: number;
}

/**
 * SPAWN: string file, string cwd, u32 argc + argc strings, u32 envc + envc strings [, string stdin
 * path]. SPAWN_TTY: u32 cols, u32 rows, then the same without the stdin path.
 */
export function encodeSpawn(id: number, fields: SpawnRequestFields): Buffer {
  const terminal = fields.terminal;
  const stdin = fields.stdinPath && !terminal ? [fields.stdinPath] : [];
  const strings = [fields.file, fields.cwd, ...fields.argv, ...fields.env, ...stdin];
  let size = HEADER_BYTES + 8 + (terminal ? 8 : 0);
  for (const s of strings) size += 4 + Buffer.byteLength(s, 'utf8');
  if (size - 4 > MAX_REQUEST_BYTES) {
    throw new RangeError(
      `the command line and environment take ${size} bytes; at most ${MAX_REQUEST_BYTES} can be started`,
    );
  }
  const frame = Buffer.allocUnsafe(size);
  let at = header(frame, size, terminal ? RequestType.spawnTty : RequestType.spawn, id);
  if (terminal) {
    frame.writeUInt32LE(terminal.cols, at);
    frame.writeUInt32LE(terminal.rows, at + 4);
    at += 8;
  }
  const string = (s: string) => {
    const length = frame.write(s, at + 4, 'utf8');
    frame.writeUInt32LE(length, at);
    at += 4 + length;
  };
  string(fields.file);
  string(fields.cwd);
  frame.writeUInt32LE(fields.argv.length, at);
  at += 4;
  for (const arg of fields.argv) string(arg);
  frame.writeUInt32LE(fields.env.length, at);
  at += 4;
  for (const entry of fields.env) string(entry);
  for (const path of stdin) string(path);
  return frame;
}

/** INPUT: bytes for a terminal's input (the helper keeps at most 1 MiB it could not write yet). */
export function encodeInput(id: number, data: Buffer): Buffer {
  const frame = Buffer.allocUnsafe(HEADER_BYTES + data.length);
  header(frame, frame.length, RequestType.input, id);
  data.copy(frame, HEADER_BYTES);
  return frame;
}

/** RESIZE: u32 cols, u32 rows of a terminal (its foreground group gets SIGWINCH). */
export function encodeResize(id: number, size: TerminalSize): Buffer {
  const frame = Buffer.allocUnsafe(HEADER_BYTES + 8);
  header(frame, frame.length, RequestType.resize, id);
  frame.writeUInt32LE(size.cols, HEADER_BYTES);
  frame.writeUInt32LE(size.rows, HEADER_BYTES + 4);
  return frame;
}

/**
 * PAUSE_OUTPUT: the helper stops reading this child's output (its fds leave epoll), so the child
 * blocks on its own full pipe while every other child goes on. RESUME_OUTPUT undoes it.
 */
export function encodePauseOutput(id: number): Buffer {
  return emptyRequest(RequestType.pauseOutput, id);
}

export function encodeResumeOutput(id: number): Buffer {
  return emptyRequest(RequestType.resumeOutput, id);
}

export function encodeCloseOutput(id: number): Buffer {
  return emptyRequest(RequestType.closeOutput, id);
}

/** Answered with a PONG of the same id: proof that the helper runs and reads its requests. */
export function encodePing(id: number): Buffer {
  return emptyRequest(RequestType.ping, id);
}

function emptyRequest(type: number, id: number): Buffer {
  const frame = Buffer.allocUnsafe(HEADER_BYTES);
  header(frame, HEADER_BYTES, type, id);
  return frame;
}

function header(frame: Buffer, size: number, type: number, id: number): number {
  frame.writeUInt32LE(size - 4, 0);
  frame.writeUInt8(type, 4);
  frame.writeUInt32LE(id, 5);
  return HEADER_BYTES;
}

export interface SpawnerEvent {
  type: EventTypeCode;
  id: number;
  /** The bytes after the header; a view into what was read, valid until the handler returns. */
  payload: Buffer;
}

/** The helper's stream cannot be trusted past this point: the reader reads nothing more. */
export class SpawnerProtocolError extends Error {}

/**
 * Cuts the helper's stdout into frames. A frame inside one chunk is handed out as a view of it
 * (no copy); only a frame split across reads is put together. After a corrupt frame it throws
 * SpawnerProtocolError and ignores everything after: bytes read from the middle of a frame must
 * never reach a step as output or as an exit.
 */
export class FrameReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private broken = false;

  constructor(private readonly onEvent: (event: SpawnerEvent) => void) {}

  push(chunk: Buffer): void {
    if (this.broken) return;
    let data = chunk;
    if (this.pendingBytes > 0) {
      this.pending.push(chunk);
      this.pendingBytes += chunk.length;
      const needed = this.pendingBytes >= 4 ? 4 + peekLength(this.pending) : Number.POSITIVE_INFINITY;
      if (this.pendingBytes < needed) return;
      data = Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
    }
    let at = 0;
    while (data.length - at >= 4) {
      const length = data.readUInt32LE(at);
      if (length < 5 || length > MAX_EVENT_FRAME_BYTES) {
        this.broken = true;
        throw new SpawnerProtocolError(`spawner sent a frame of length ${length}`);
      }
      if (data.length - at - 4 < length) break;
      const type = data[at + 4] as EventTypeCode;
      try {
        this.onEvent({
          type,
          id: data.readUInt32LE(at + 5),
          payload: data.subarray(at + HEADER_BYTES, at + 4 + length),
        });
      } catch (err) {
        // The handler rejected the frame (an unknown type): the rest of this chunk is suspect.
        this.broken = true;
        throw err;
      }
      at += 4 + length;
    }
    if (at < data.length) {
      // Copied: the rest of a big chunk must not keep the whole chunk alive.
      const rest = Buffer.from(data.subarray(at));
      this.pending = [rest];
      this.pendingBytes = rest.length;
    }
  }
}

/** The length field of a frame whose first bytes are spread over `chunks`. */
function peekLength(chunks: Buffer[]): number {
  const head = Buffer.concat(chunks, 4).subarray(0, 4);
  return head.readUInt32LE(0);
}
