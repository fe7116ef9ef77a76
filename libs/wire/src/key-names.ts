/**
 * The keys' names, without zod: what the agent needs of keys.ts (its single executable loads no
 * schema it does not use; docs/agent.md, "Memory"). keys.ts re-exports all of it.
 */

/**
 * Job ids become part of Redis keys and Redis ACL patterns, so they are restricted to
 * characters that mean nothing to either: no braces (hash tags), no glob characters, no spaces.
 */
export const JOB_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
export const JOB_ID_MAX_LENGTH = 128;
export const JOB_ID_PATTERN_MESSAGE =
  'job id may contain only letters, digits, ".", "_", ":" and "-", and must start with a letter or digit';

/** What JobIdSchema says of `id`, each broken rule in its order; empty for a valid id. */
export function jobIdProblems(id: string): string[] {
  const problems: string[] = [];
  if (id.length < 1) problems.push('job id must not be empty');
  if (id.length > JOB_ID_MAX_LENGTH) problems.push(`job id is at most ${JOB_ID_MAX_LENGTH} characters`);
  if (!JOB_ID_PATTERN.test(id)) problems.push(JOB_ID_PATTERN_MESSAGE);
  return problems;
}

/**
 * How per-job keys are spelt.
 * - `plain`: `sandbox:<jobId>:in`, exactly as seeds/000 prints it (the smoke tests push to it by hand).
 * - `tagged`: `sandbox:{<jobId>}:in`, a Redis Cluster hash tag, so every key of a job lives in one
 *   slot and the services can touch several of them in one MULTI or script. The services always
 *   use this style and start the agent with `--key-style tagged`.
 */
export const KEY_STYLES = ['plain', 'tagged'] as const;
export type KeyStyle = (typeof KEY_STYLES)[number];

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

/**
 * LIST carrying one upload's or download's tar stream in chunks (an empty value ends it), under
 * the sandbox's own prefix, so its Redis user may use it and cleanup finds it.
 */
export function transferKey(keys: SandboxKeys, transferId: string): string {
  return `${keys.prefix}xfer:${transferId}`;
}

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
