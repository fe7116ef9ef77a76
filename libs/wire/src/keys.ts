import * as z from 'zod';
import { JOB_ID_MAX_LENGTH, JOB_ID_PATTERN, JOB_ID_PATTERN_MESSAGE, KEY_STYLES } from './key-names.js';

export * from './key-names.js';

/** A job id (key-names.ts says why so plain); jobIdProblems words the same rules without zod. */
export const JobIdSchema = z
  .string()
  .min(1, 'job id must not be empty')
  .max(JOB_ID_MAX_LENGTH, `job id is at most ${JOB_ID_MAX_LENGTH} characters`)
  .regex(JOB_ID_PATTERN, JOB_ID_PATTERN_MESSAGE);

/** How per-job keys are spelt: key-names.ts says what each style means. */
export const KeyStyleSchema = z.enum(KEY_STYLES);

/** Transfer ids become part of a key: short and plain. */
export const TransferIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a transfer id is 1 to 64 letters, digits, "_" or "-"');

/** A terminal's id: part of its keys, like a transfer's. */
export const TerminalIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a terminal id is 1 to 64 letters, digits, "_" or "-"');
