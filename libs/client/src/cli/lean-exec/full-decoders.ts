import { decodeJobEventFields, parseJobRecord, sandboxRecordOf, TERMINAL_STATES } from '@sandstream/bus';
import { StepEventSchema, StepResultSchema } from '@sandstream/wire';
import { SandboxClosedError } from '../../sandbox-errors.js';
import type { FullDecoders } from './lean-decode.js';

/**
 * The schemas the full CLI decodes with, for the records the lean `exec`'s fast paths are not
 * sure of (lean-decode.ts). A bundle of its own in the CLI's build (sandstream-exec-full.cjs),
 * required only on such a record: an ordinary `exec` never loads zod.
 */
export const fullDecoders: FullDecoders = {
  stepEvent: (json) => {
    const parsed = StepEventSchema.safeParse(json);
    return parsed.success ? parsed.data : undefined;
  },
  stepResult: (json) => {
    const parsed = StepResultSchema.safeParse(json);
    return parsed.success ? parsed.data : undefined;
  },
  endsJob: (fields) => {
    const job = decodeJobEventFields(fields);
    return job?.type === 'transition' && TERMINAL_STATES.includes(job.to);
  },
  closedMessage: (sandboxId, hash) => {
    const record = parseJobRecord(hash);
    const sandbox = record ? sandboxRecordOf(record) : null;
    return sandbox
      ? new SandboxClosedError(sandboxId, sandbox.state, sandbox.reason, sandbox.message).message
      : undefined;
  },
};
