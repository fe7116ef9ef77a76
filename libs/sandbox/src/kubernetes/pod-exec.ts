import { PassThrough, type Readable } from 'node:stream';
import { Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';

/** Stderr kept for the error message of a failed command. */
const STDERR_KEPT = 4096;
/** Stdin bytes the socket may hold unsent before the next chunk waits. */
const STDIN_BUFFERED = 4 * 1024 * 1024;

export interface PodExec {
  /** The command's standard output; read it, or the pod's end of the socket waits. */
  stdout: Readable;
  /** Resolves when the command exited 0; rejects with its exit status and stderr otherwise. */
  done: Promise<void>;
}

/**
 * One command in a pod's container through the API server's `pods/exec` (WebSocket, channel
 * protocol v5 so stdin's end reaches the command). Stdout is paced: the socket stops reading while
 * its reader is behind. Stdin, when given, is streamed with the socket's buffer bounded.
 */
export async function execInPod(options: {
  kubeConfig: KubeConfig;
  namespace: string;
  pod: string;
  container: string;
  command: string[];
  stdin?: AsyncIterable<Buffer>;
}): Promise<PodExec> {
  const stdout = new PassThrough({ highWaterMark: 1024 * 1024 });
  let stderr = '';
  const stderrSink = new PassThrough();
  stderrSink.on('data', (chunk: Buffer) => {
    if (stderr.length < STDERR_KEPT) stderr += chunk.toString('utf8').slice(0, STDERR_KEPT - stderr.length);
  });
  const stdinStream = options.stdin ? new PassThrough() : null;
  const what = `${options.command[0]} in pod ${options.pod}`;
  let settle!: (err?: Error) => void;
  const done = new Promise<void>((resolve, reject) => {
    let settled = false;
    settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      if (err) {
        stdout.destroy(err);
        reject(err);
      } else resolve();
    };
  });
  done.catch(() => {});
  const onStatus = (status: V1Status) => {
    if (status.status === 'Success') return settle();
    const detail = stderr.trim() ? `: ${stderr.trim()}` : '';
    settle(new Error(`${what} failed (${status.message ?? status.reason ?? 'no status'})${detail}`));
  };
  const ws = await new Exec(options.kubeConfig).exec(
    options.namespace,
    options.pod,
    options.container,
    options.command,
    stdout,
    stderrSink,
    stdinStream,
    false,
    onStatus,
  );
  ws.on('message', () => {
    // After client-node's handler wrote the frame: pause the socket until the reader caught up.
    if (stdout.writableNeedDrain && !ws.isPaused) {
      ws.pause();
      stdout.once('drain', () => ws.resume());
    }
  });
  ws.on('close', () => settle(new Error(`${what}: the exec connection closed without an exit status`)));
  ws.on('error', (err) => settle(new Error(`${what}: ${err.message}`)));
  if (options.stdin && stdinStream) {
    const source = options.stdin;
    void (async () => {
      try {
        for await (const chunk of source) {
          stdinStream.write(chunk);
          while (ws.bufferedAmount > STDIN_BUFFERED && ws.readyState === ws.OPEN) {
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
          if (ws.readyState !== ws.OPEN) throw new Error('the exec connection closed');
        }
        stdinStream.end();
      } catch (err) {
        settle(new Error(`${what}: feeding its input failed: ${(err as Error).message}`));
        ws.close();
      }
    })();
  }
  return { stdout, done };
}
