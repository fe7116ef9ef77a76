import { type Duplex, Transform, type TransformCallback } from 'node:stream';
import type Dockerode from 'dockerode';
import type { SandboxExec, SandboxExecRun } from '../snapshot/work-tar.js';

/** Stderr kept for the error message of a failed command. */
const STDERR_KEPT = 4096;
/** How long the engine may take to record an exec's exit code after its stream ended. */
const EXIT_CODE_WAIT_MS = 5000;

/**
 * The engine's multiplexed exec stream (no TTY) split into stdout, passed on with backpressure
 * (a large archive is read at the pace of its reader, never buffered whole), and stderr, of which
 * the start is kept for the error message. Each frame: 1 byte stream id, 3 zero bytes, a 4-byte
 * big-endian length, then the payload.
 */
class ExecFrames extends Transform {
  stderr = '';
  private pending: Buffer = Buffer.alloc(0);

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (this.pending.length >= 8) {
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + size) break;
      const stream = this.pending[0];
      const payload = this.pending.subarray(8, 8 + size);
      this.pending = this.pending.subarray(8 + size);
      if (stream === 2) {
        if (this.stderr.length < STDERR_KEPT)
          this.stderr += payload.toString('utf8').slice(0, STDERR_KEPT - this.stderr.length);
      } else this.push(payload);
    }
    callback();
  }
}

/**
 * One command in a running container through `docker exec`, as the container's user, with its
 * capabilities: the counterpart of pods/exec for sandboxes whose files only the sandbox itself
 * sees (gVisor). Stdin, when given, is streamed with backpressure and then half-closed, so the
 * command sees its end.
 */
export function dockerExec(docker: Dockerode, containerId: string): SandboxExec {
  return async (command, stdin) => {
    const container = docker.getContainer(containerId);
    const what = `${command[0]} in container ${containerId.slice(0, 12)}`;
    const exec = await container.exec({
      Cmd: command,
      AttachStdin: stdin !== undefined,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    });
    const socket = (await exec.start({ hijack: true, stdin: stdin !== undefined })) as Duplex;
    const frames = new ExecFrames({ highWaterMark: 1024 * 1024 });
    socket.pipe(frames);
    // Its reader dropped the output: the connection goes too, and with it the command's stdout.
    frames.once('close', () => {
      if (!socket.readableEnded) socket.destroy();
    });
    const done = new Promise<void>((resolve, reject) => {
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        frames.destroy(err);
        socket.destroy();
        reject(err);
      };
      socket.once('error', (err) => fail(new Error(`${what}: ${err.message}`)));
      let ended = false;
      socket.once('close', () => {
        if (!ended) fail(new Error(`${what}: the exec connection closed before the command ended`));
      });
      // The engine ends the stream once the command exited and its output was sent.
      socket.once('end', () => {
        ended = true;
        void exitCodeOf(exec).then((code) => {
          if (settled) return;
          if (code === 0) {
            settled = true;
            resolve();
            return;
          }
          const detail = frames.stderr.trim() ? `: ${frames.stderr.trim()}` : '';
          fail(new Error(`${what} exited ${code ?? 'without an exit code'}${detail}`));
        }, fail);
      });
      if (stdin !== undefined) {
        void (async () => {
          try {
            for await (const chunk of stdin) {
              if (!socket.write(chunk)) await drainOrClose(socket);
            }
            socket.end();
          } catch (err) {
            fail(new Error(`${what}: feeding its input failed: ${(err as Error).message}`));
          }
        })();
      }
    });
    done.catch(() => {});
    const run: SandboxExecRun = { stdout: frames, done };
    return run;
  };
}

function drainOrClose(socket: Duplex): Promise<void> {
  return new Promise((resolve, reject) => {
    const onDrain = () => {
      socket.off('close', onClose);
      resolve();
    };
    const onClose = () => {
      socket.off('drain', onDrain);
      reject(new Error('the exec connection closed'));
    };
    socket.once('drain', onDrain);
    socket.once('close', onClose);
  });
}

/** The exec's exit code; the engine may record it a moment after the stream ended. */
async function exitCodeOf(exec: Dockerode.Exec): Promise<number | null> {
  const deadline = Date.now() + EXIT_CODE_WAIT_MS;
  for (;;) {
    const info = await exec.inspect();
    if (!info.Running || Date.now() > deadline) return info.ExitCode;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
