import {
  decodeEventEntry,
  type SandboxKeys,
  type StepEvent,
  type StepInput,
  type StepResult,
  StepResultSchema,
} from '@sandstream/wire';
import type { Redis } from 'ioredis';

/**
 * The producer's side of the wire protocol, as the test suites need it: push a step, wait for
 * its result, read its events. `blocking` must be a connection of its own (BRPOP holds it).
 */
export class StepChannel {
  constructor(
    private readonly redis: Redis,
    private readonly blocking: Redis,
    readonly keys: SandboxKeys,
  ) {}

  async push(step: StepInput): Promise<void> {
    await this.redis.lpush(this.keys.in, JSON.stringify(step));
  }

  /** Waits for the next result (the agent LPUSHes, so the oldest is at the right end). */
  async nextResult(timeoutSeconds = 30): Promise<StepResult> {
    const popped = await this.blocking.brpop(this.keys.results, timeoutSeconds);
    if (!popped) throw new Error(`no StepResult on ${this.keys.results} within ${timeoutSeconds}s`);
    return StepResultSchema.parse(JSON.parse(popped[1]));
  }

  async run(step: StepInput, timeoutSeconds = 30): Promise<StepResult> {
    await this.push(step);
    const result = await this.nextResult(timeoutSeconds);
    if (result.stepId !== step.stepId) {
      throw new Error(`expected the result of ${step.stepId}, got ${String(result.stepId)}`);
    }
    return result;
  }

  async events(stepId: string): Promise<StepEvent[]> {
    const entries = await this.redis.xrange(this.keys.events, '-', '+');
    return entries.flatMap(([, fields]) => decodeEventEntry(fields)).filter((e) => e.stepId === stepId);
  }

  async stdout(stepId: string): Promise<string[]> {
    return (await this.events(stepId)).filter((e) => e.kind === 'stdout').map((e) => e.line ?? '');
  }
}
