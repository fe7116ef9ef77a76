import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { type WebSocket, WebSocketServer } from 'ws';
import { ApiStatusError } from './api-status.js';
import type { DockerPodRunner } from './docker-pod-runner.js';

/** The exec subresource's channels (k8s.io/apimachinery remotecommand). */
const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const STATUS = 3;
/** v5.channel.k8s.io: a `[255, channel]` message closes that channel (stdin's end of file). */
const CLOSE = 255;
const PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io'];

const execPattern = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/exec\/?$/;

/**
 * `pods/exec` as the API server serves it to client-node's Exec: a WebSocket upgrade speaking the
 * channel protocol, here a `docker exec` in the pod's container. Only v5 (and v4, without a way
 * to close stdin) are offered; no TTY, no resize.
 */
export function podExecUpgrade(options: { docker: Docker; runner: DockerPodRunner }) {
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => PROTOCOLS.find((p) => offered.has(p)) ?? false,
  });
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const url = new URL(req.url ?? '/', 'http://standin');
    const m = execPattern.exec(url.pathname);
    const refuse = (code: number, message: string) => {
      socket.end(`HTTP/1.1 ${code} ${message.replace(/[\r\n]/g, ' ')}\r\nConnection: close\r\n\r\n`);
    };
    if (!m) {
      refuse(404, 'Not Found');
      return;
    }
    let dockerId: string;
    try {
      dockerId = options.runner.runningContainer(
        decodeURIComponent(m[1]!),
        decodeURIComponent(m[2]!),
        url.searchParams.get('container') ?? undefined,
      );
    } catch (err) {
      refuse(err instanceof ApiStatusError ? err.code : 500, (err as Error).message);
      return;
    }
    const command = url.searchParams.getAll('command');
    if (command.length === 0) {
      refuse(400, 'you must specify at least one command');
      return;
    }
    if (url.searchParams.get('tty') === 'true') {
      refuse(400, 'tty is not supported by the stand-in');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      void runExec(options.docker, dockerId, command, url.searchParams.get('stdin') === 'true', ws).catch(
        (err: unknown) => {
          sendStatus(ws, { status: 'Failure', message: (err as Error).message, reason: 'InternalError' });
          ws.close();
        },
      );
    });
  };
}

function send(ws: WebSocket, channel: number, data: Buffer): void {
  if (ws.readyState === ws.OPEN) ws.send(Buffer.concat([Buffer.from([channel]), data]));
}

function sendStatus(ws: WebSocket, status: Record<string, unknown>): void {
  send(ws, STATUS, Buffer.from(JSON.stringify({ metadata: {}, ...status })));
}

async function runExec(
  docker: Docker,
  containerId: string,
  command: string[],
  withStdin: boolean,
  ws: WebSocket,
): Promise<void> {
  // Frames the client sends while the exec is being created would otherwise be dropped.
  const early: Buffer[] = [];
  const collect = (data: Buffer) => early.push(data);
  ws.on('message', collect);
  const exec = await docker.getContainer(containerId).exec({
    Cmd: command,
    AttachStdin: withStdin,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
  });
  const stream = (await exec.start({ hijack: true, stdin: withStdin })) as Duplex;
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  stdout.on('data', (chunk: Buffer) => send(ws, STDOUT, chunk));
  stderr.on('data', (chunk: Buffer) => send(ws, STDERR, chunk));
  docker.modem.demuxStream(stream, stdout, stderr);
  const onFrame = (data: Buffer) => {
    if (data.length === 0) return;
    if (data[0] === STDIN && withStdin) {
      // Backpressure: the client's next frames wait in the socket while the process is behind.
      if (!stream.write(data.subarray(1))) {
        ws.pause();
        stream.once('drain', () => ws.resume());
      }
    } else if (data[0] === CLOSE && data[1] === STDIN) stream.end();
  };
  ws.off('message', collect);
  for (const data of early) onFrame(data);
  ws.on('message', onFrame);
  // A client gone mid-way leaves the process without stdin, as the kubelet does.
  ws.on('close', () => stream.end());
  await new Promise<void>((resolve, reject) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', reject);
  });
  const { ExitCode } = await exec.inspect();
  if (ExitCode === 0) sendStatus(ws, { status: 'Success' });
  else {
    sendStatus(ws, {
      status: 'Failure',
      message: `command terminated with non-zero exit code: error executing command ${JSON.stringify(command)}, exit code ${ExitCode}`,
      reason: 'NonZeroExitCode',
      details: { causes: [{ reason: 'ExitCode', message: String(ExitCode) }] },
    });
  }
  ws.close();
}
