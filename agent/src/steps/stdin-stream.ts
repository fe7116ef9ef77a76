import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, openSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { SandboxKeys } from '@sandstream/wire';
import { commandInputKey, decodeCommandInput } from '@sandstream/wire/lean';
import type { Redis } from 'ioredis';
import { listInput } from './list-input.js';
import { privateStdinDir } from './stdin-file.js';

const run = promisify(execFile);

/**
 * Where run steps with `stdinStream` read their input (the agent's Redis): each command's input
 * list (wire command-input.ts), popped on a connection of its own while the command runs.
 */
export class StdinChannel {
  constructor(
    private readonly keys: SandboxKeys,
    /** A fresh connection as the agent's own Redis user; each stream opens one and closes it. */
    private readonly connect: () => Redis,
  ) {}

  /** A named pipe for the command to open as its stdin (launch it with `path`, then start()). */
  async create(commandId: string, workspace: string): Promise<StdinStream> {
    return StdinStream.create(commandInputKey(this.keys, commandId), workspace, this.connect);
  }
}

/**
 * A command's open stdin: a named pipe (the launchers open a path as fd 0, so both the native
 * spawner and Node's spawn take it unchanged) fed from the command's input list. The agent holds
 * the pipe open read-write until the command has opened it, so neither side's open blocks; from
 * start() on the agent is its only writer, so closing the input (or the command ending) is EOF.
 */
export class StdinStream {
  private readonly stopped = new AbortController();
  private socket: Socket | undefined;
  private pumping: Promise<void> = Promise.resolve();

  private constructor(
    readonly path: string,
    private readonly dir: string,
    private holdFd: number | undefined,
    private readonly key: string,
    private readonly connect: () => Redis,
  ) {}

  static async create(key: string, workspace: string, connect: () => Redis): Promise<StdinStream> {
    const dir = await privateStdinDir(workspace);
    const path = join(dir, 'stdin');
    try {
      // Node has no mkfifo of its own; every image with a shell has one (coreutils, busybox).
      await run('mkfifo', ['-m', '600', path]);
      // Read-write and non-blocking: a FIFO's open waits for the other side otherwise.
      const holdFd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
      return new StdinStream(path, dir, holdFd, key, connect);
    } catch (err) {
      await rm(dir, { recursive: true, force: true }).catch(() => {});
      throw new Error(`an open stdin needs mkfifo in the image: ${(err as Error).message}`);
    }
  }

  /** The command has the pipe open: input flows from its list until closed or stop(). */
  start(): void {
    let writeFd: number;
    try {
      writeFd = openSync(this.path, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch {
      // Cannot happen while the hold is open; if it does, the command reads EOF, the agent goes on.
      void this.stop();
      return;
    }
    this.releaseHold();
    void rm(this.dir, { recursive: true, force: true }).catch(() => {});
    const socket = new Socket({ fd: writeFd, readable: false, writable: true });
    // EPIPE once the command closed its stdin or exited: what is left is not for anyone.
    socket.on('error', () => this.stopped.abort());
    this.socket = socket;
    this.pumping = this.pump(socket);
  }

  private async pump(socket: Socket): Promise<void> {
    const reader = this.connect();
    const signal = this.stopped.signal;
    try {
      for await (const value of listInput(reader, this.key, signal)) {
        const input = decodeCommandInput(value);
        if (input?.kind === 'end') {
          socket.end();
          return;
        }
        // Back-pressure: a command that reads slowly keeps the rest waiting in Redis.
        if (input && !socket.write(input.data)) {
          await Promise.race([once(socket, 'drain'), once(signal, 'abort')]).catch(() => {});
        }
      }
    } finally {
      reader.disconnect();
    }
  }

  /** The command ended (or never started): stop reading, close the pipe, drop what is left. */
  async stop(): Promise<void> {
    this.stopped.abort();
    this.socket?.destroy();
    this.releaseHold();
    await this.pumping.catch(() => {});
    await rm(this.dir, { recursive: true, force: true }).catch(() => {});
    const cleaner = this.connect();
    try {
      await cleaner.del(this.key);
    } catch {
      // The list expires by itself (clients renew its expiry on each write).
    } finally {
      cleaner.disconnect();
    }
  }

  private releaseHold(): void {
    if (this.holdFd === undefined) return;
    closeSync(this.holdFd);
    this.holdFd = undefined;
  }
}
