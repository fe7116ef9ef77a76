import { Limits } from '@sandstream/wire';
import { z } from 'zod';

/**
 * What the generated messages of E2B's `process.Process` (src/gen/process/process_pb.ts, from
 * proto/process/process.proto) cannot say themselves: proto3 has no required fields and no
 * ranges. Checked on the decoded message (its other fields pass through untouched) by
 * parseMessage, which names the call and the field of the first problem.
 */

/** A terminal's window (E2B's PTY message); the limits are our terminals' own. */
export const PtySchema = z.object({
  size: z.object(
    {
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
    },
    { error: 'pty.size is required' },
  ),
});

export const StartRequestSchema = z.object({
  process: z.object({ cmd: z.string().min(1, 'process.cmd is required') }, { error: 'process is required' }),
  pty: PtySchema.optional(),
});

export const UpdateRequestSchema = z.object({ pty: PtySchema.optional() });
