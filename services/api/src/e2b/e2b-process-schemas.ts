import { Limits } from '@sandstream/wire';
import { z } from 'zod';

/**
 * The messages of E2B's `process.Process` service (services/api/proto/process/process.proto) in Connect's
 * JSON form (proto3 JSON: lowerCamelCase fields, bytes as base64, enums by name), as far as
 * this server reads them. Written from the protocol: ProcessConfig{cmd=1,args=2,envs=3,cwd=4},
 * StartRequest{process=1,pty=2,tag=3,stdin=4}, ProcessSelector{pid=1|tag=2},
 * SendSignalRequest{process=1,signal=2}, ProcessEvent{start=1,data=2,end=3,keepalive=4},
 * PTY{size=1}, PTY.Size{cols=1,rows=2}, UpdateRequest{process=1,pty=2},
 * SendInputRequest{process=1,input=2}, ProcessInput{stdin=1|pty=2}, CloseStdinRequest{process=1}.
 */
export const ProcessConfigSchema = z.object({
  cmd: z.string().min(1, 'process.cmd is required'),
  args: z.array(z.string()).default([]),
  envs: z.record(z.string(), z.string()).default({}),
  cwd: z.string().optional(),
});
export type ProcessConfig = z.infer<typeof ProcessConfigSchema>;

/** A terminal's window (E2B's PTY message); the limits are our terminals' own. */
export const PtySchema = z.strictObject({
  size: z.strictObject({
    cols: z
      .number()
      .int()
      .min(1, 'pty.size.cols is at least 1')
      .max(Limits.terminalMaxCols, `pty.size.cols is at most ${Limits.terminalMaxCols}`),
    rows: z
      .number()
      .int()
      .min(1, 'pty.size.rows is at least 1')
      .max(Limits.terminalMaxRows, `pty.size.rows is at most ${Limits.terminalMaxRows}`),
  }),
});
export type Pty = z.infer<typeof PtySchema>;

export const StartRequestSchema = z.object({
  process: ProcessConfigSchema,
  pty: PtySchema.optional(),
  tag: z.string().optional(),
  stdin: z.boolean().optional(),
});

export const ProcessSelectorSchema = z.union([
  z.object({ pid: z.number().int().nonnegative() }),
  z.object({ tag: z.string() }),
]);

export const SelectRequestSchema = z.object({ process: ProcessSelectorSchema });

export const UpdateRequestSchema = z.strictObject({
  process: ProcessSelectorSchema,
  pty: PtySchema.optional(),
});

/** Bytes (base64 in JSON), one of the two: a command's stdin or a terminal's keystrokes. */
const base64Bytes = z.base64('input bytes are base64');
export const ProcessInputSchema = z.union([
  z.strictObject({ stdin: base64Bytes }),
  z.strictObject({ pty: base64Bytes }),
]);

export const SendInputRequestSchema = z.strictObject({
  process: ProcessSelectorSchema,
  input: ProcessInputSchema,
});

export const CloseStdinRequestSchema = z.strictObject({ process: ProcessSelectorSchema });

export const SendSignalRequestSchema = z.object({
  process: ProcessSelectorSchema,
  signal: z.union([z.enum(['SIGNAL_UNSPECIFIED', 'SIGNAL_SIGTERM', 'SIGNAL_SIGKILL']), z.number().int()]),
});

/** The events of a process stream (ProcessEvent), as sent. */
export type ProcessEvent =
  | { start: { pid: number } }
  | { data: { stdout: string } | { stderr: string } | { pty: string } }
  | { end: { exitCode: number; exited: boolean; status: string; error?: string } }
  | { keepalive: Record<string, never> };
