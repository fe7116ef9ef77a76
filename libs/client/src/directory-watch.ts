import { Limits, type WatchEvent, WatchEventSchema } from '@sandstream/wire';
import { z } from 'zod';
import { parseOptions } from './client-options.js';
import type { ExecResult } from './command-output.js';
import { SandboxFileError } from './sandbox-errors.js';
import type { SandboxTransport } from './transport.js';

export type { WatchEvent } from '@sandstream/wire';

const fn = <T>(name: string) =>
  z.custom<T>((v) => typeof v === 'function', { message: `${name} must be a function` });

export const WatchOptionsSchema = z.strictObject({
  /** Every directory below it too (default: the directory's own entries). */
  recursive: z.boolean().optional(),
  /** Told each change as the sandbox saw it. */
  onEvent: fn<(event: WatchEvent) => void>('onEvent'),
  /** It stops by itself after this long (default and limit: 24 h). */
  timeoutSeconds: z
    .number()
    .positive('timeoutSeconds must be positive')
    .max(Limits.runMaxTimeoutSeconds, `timeoutSeconds is at most ${Limits.runMaxTimeoutSeconds}`)
    .optional(),
});
export type WatchOptions = z.input<typeof WatchOptionsSchema>;

/** A directory being watched: its command id, stop(), and its end. */
export interface DirectoryWatch {
  readonly id: string;
  /** Stops watching (a cancel of its command); `done` then resolves. */
  stop(): Promise<void>;
  /** Resolves with its command's result once it stopped (cancelled, timed out, or failed). */
  readonly done: Promise<ExecResult>;
}

/**
 * Starts a watch step (wire step.ts) and follows its output: resolves once the watcher is in
 * place in the sandbox (its first line), so every change after that is told; a path that is
 * not a directory throws SandboxFileError as the other file calls do.
 */
export async function watchDirectory(
  sandboxId: string,
  transport: SandboxTransport,
  path: string,
  watchOptions: WatchOptions,
): Promise<DirectoryWatch> {
  const options = parseOptions(WatchOptionsSchema, watchOptions, 'watch options');
  let commandId: string | undefined;
  let ready: () => void = () => {};
  const watching = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const done = transport.watch(
    sandboxId,
    {
      kind: 'watch',
      path,
      workingDirectory: null,
      ...(options.recursive !== undefined ? { recursive: options.recursive } : {}),
      ...(options.timeoutSeconds !== undefined ? { timeoutSeconds: options.timeoutSeconds } : {}),
    },
    {
      onStart: (id) => {
        commandId = id;
      },
      onLine: (line) => {
        if (line.stream !== 'stdout') return;
        const parsed = WatchEventSchema.safeParse(safeJson(line.line));
        if (!parsed.success) return;
        if (parsed.data.type === 'watching') ready();
        else options.onEvent(parsed.data);
      },
    },
  );
  const ended = await Promise.race([watching.then(() => null), done]);
  if (ended !== null) {
    throw new SandboxFileError(
      ended.errorMessage ?? `the watch of ${path} ended before it started`,
      ended.errorCode ?? undefined,
    );
  }
  // Its end is the caller's to read (or not): a sandbox closing meanwhile is no unhandled rejection.
  done.catch(() => {});
  const id = commandId as string;
  return { id, stop: () => transport.cancel(sandboxId, id, 'watch stopped by a client'), done };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
