import * as z from 'zod';

/**
 * Job ids become part of Redis keys and Redis ACL patterns, so they are restricted to
 * characters that mean nothing to either: no braces (hash tags), no glob characters, no spaces.
 */
export const JobIdSchema = z
  .string()
  .min(1, 'job id must not be empty')
  .max(128, 'job id is at most 128 characters')
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:-]*$/,
    'job id may contain only letters, digits, ".", "_", ":" and "-", and must start with a letter or digit',
  );

/**
 * How per-job keys are spelt.
 * - `plain`: `sandbox:<jobId>:in`, exactly as seeds/000 prints it (the smoke tests push to it by hand).
 * - `tagged`: `sandbox:{<jobId>}:in`, a Redis Cluster hash tag, so every key of a job lives in one
 *   slot and the services can touch several of them in one MULTI or script. The services always
 *   use this style and start the agent with `--key-style tagged`.
 */
export const KeyStyleSchema = z.enum(['plain', 'tagged']);
export type KeyStyle = z.infer<typeof KeyStyleSchema>;

export interface SandboxKeys {
  /** LIST: producers LPUSH steps, the agent pops the other end (FIFO). */
  readonly in: string;
  /** STREAM capped with MAXLEN ~: started / stdout / stderr / completed events. */
  readonly events: string;
  /** LIST: the agent LPUSHes one StepResult per step. */
  readonly results: string;
  /** STRING with a TTL the agent keeps refreshing: present means alive. */
  readonly heartbeat: string;
  /** LIST: cancel messages for the running step. */
  readonly control: string;
  /**
   * Pub/sub CHANNEL, not a key: the agent PUBLISHes on it once, right after its first heartbeat,
   * so whoever waits for it to start is told instead of polling the heartbeat.
   */
  readonly ready: string;
  /**
   * LIST: a warm pool member's agent waits here (BRPOP) for the one claim that binds it to a job
   * (pool-claim.ts). Only ever used under a member's id, never under a job's.
   */
  readonly claim: string;
  /** Prefix common to all of the above (for ACL patterns and cleanup). */
  readonly prefix: string;
}

export function sandboxKeyPrefix(jobId: string, style: KeyStyle = 'plain'): string {
  return style === 'tagged' ? `sandbox:{${jobId}}:` : `sandbox:${jobId}:`;
}

export function sandboxKeys(jobId: string, style: KeyStyle = 'plain'): SandboxKeys {
  const prefix = sandboxKeyPrefix(jobId, style);
  return {
    prefix,
    in: `${prefix}in`,
    events: `${prefix}events`,
    results: `${prefix}results`,
    heartbeat: `${prefix}heartbeat`,
    control: `${prefix}control`,
    ready: `${prefix}ready`,
    claim: `${prefix}claim`,
  };
}

/**
 * STRING: one step's result (StepResult JSON), SET by an agent that runs under the services (it
 * notifies a completion stream) and taken by the step-dispatcher. The dispatcher reads only the
 * key of the step it expects, so what a sandbox writes anywhere else, however much, costs it
 * nothing. A standalone agent LPUSHes its results to `results` instead (seed 000's contract).
 */
export function resultKey(keys: SandboxKeys, stepId: string): string {
  return `${keys.prefix}result:${stepId}`;
}

/** A result nobody took (the services were down for a day) does not stay in Redis. */
export const RESULT_KEY_TTL_SECONDS = 24 * 60 * 60;

/** Transfer ids become part of a key: short and plain. */
export const TransferIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a transfer id is 1 to 64 letters, digits, "_" or "-"');

/**
 * LIST carrying one upload's or download's tar stream in chunks (an empty value ends it), under
 * the sandbox's own prefix, so its Redis user may use it and cleanup finds it.
 */
export function transferKey(keys: SandboxKeys, transferId: string): string {
  return `${keys.prefix}xfer:${transferId}`;
}

/** A terminal's id: part of its keys, like a transfer's. */
export const TerminalIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a terminal id is 1 to 64 letters, digits, "_" or "-"');

export interface TerminalKeys {
  /** LIST: the client LPUSHes input messages (wire terminal.ts), the agent pops the other end. */
  readonly input: string;
  /** STREAM capped with MAXLEN ~: the terminal's output as it came, then an end entry. */
  readonly output: string;
}

/** A terminal's keys, under the sandbox's own prefix (its Redis user may use them; cleanup finds them). */
export function terminalKeys(keys: SandboxKeys, terminalId: string): TerminalKeys {
  return { input: `${keys.prefix}tty:${terminalId}:in`, output: `${keys.prefix}tty:${terminalId}:out` };
}
