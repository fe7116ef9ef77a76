import {
  isTerminal,
  JobStateSchema,
  type JobStore,
  jobStatesOf,
  type LiveSandboxSpecInput,
  parseLiveSandboxSpec,
  type SandboxRecord,
  sandboxRecordOf,
} from '@sandstream/bus';
import { parseOptions } from './client-options.js';
import { Sandbox, type SandboxContext } from './sandbox.js';
import {
  SandboxClosedError,
  SandboxConflictError,
  SandboxNotFoundError,
  SandboxTimeoutError,
} from './sandbox-errors.js';
import {
  type CreateSandboxOptions,
  CreateSandboxOptionsSchema,
  type ListSandboxesOptions,
  ListSandboxesOptionsSchema,
} from './sandbox-options.js';

/** How long close() waits for the services to end the sandbox before it gives up waiting. */
const CLOSE_WAIT_MS = 120_000;

export interface SandboxesContext extends SandboxContext {
  store: JobStore;
  /** Queues a validated live-sandbox spec like a job (same admission and start). */
  submit(spec: ReturnType<typeof parseLiveSandboxSpec>): Promise<{ jobId: string; created: boolean }>;
}

/**
 * Live sandboxes (`client.sandboxes`): create one and drive it command by command, reconnect to
 * one from another client, inspect and list them.
 */
export class Sandboxes {
  constructor(private readonly ctx: SandboxesContext) {}

  /**
   * Creates a sandbox and resolves once its agent is alive and it takes commands. A bad spec
   * throws SandboxSpecError naming each field and rule, and nothing is queued; a start that
   * fails throws SandboxClosedError (state failed, reason start-failed, the backend's message).
   */
  async create(input: LiveSandboxSpecInput, createOptions: CreateSandboxOptions = {}): Promise<Sandbox> {
    const options = parseOptions(CreateSandboxOptionsSchema, createOptions, 'create options');
    const spec = parseLiveSandboxSpec(input);
    const { jobId, created } = await this.ctx.submit(spec);
    if (!created) {
      // The same request again (a retry after a timeout) gets the same sandbox; an id that names
      // a job, or another tenant's sandbox, is refused rather than handed over.
      const existing = await this.get(jobId);
      if (!existing || existing.tenant !== spec.tenant) {
        throw new SandboxConflictError(
          `id ${jobId} is taken${existing ? ' by another tenant' : ' by a job'}`,
        );
      }
    }
    if (options.wait !== false)
      await waitReady(this.ctx.store, jobId, options.timeoutSeconds, options.signal);
    return new Sandbox(jobId, this.ctx);
  }

  /** A handle on an open sandbox by id (waits while it is still being created). */
  async connect(id: string, connectOptions: CreateSandboxOptions = {}): Promise<Sandbox> {
    const options = parseOptions(CreateSandboxOptionsSchema, connectOptions, 'connect options');
    await waitReady(this.ctx.store, id, options.timeoutSeconds, options.signal);
    await this.ctx.commands.touch(id);
    return new Sandbox(id, this.ctx);
  }

  /**
   * A handle on a sandbox by id with no round trip: nothing is checked until it is used (a
   * command to a sandbox that is not ready is refused then, with the same typed errors). For
   * callers that check the record themselves, such as the HTTP API. With `tenant`, a command to
   * another tenant's sandbox is refused as one to a sandbox that does not exist, in the same
   * script that pushes it.
   */
  handle(id: string, options: { tenant?: string } = {}): Sandbox {
    if (options.tenant === undefined) return new Sandbox(id, this.ctx);
    return new Sandbox(id, { ...this.ctx, commands: this.ctx.commands.forTenant(options.tenant) });
  }

  /**
   * Closes a sandbox by id in any state (queued, being created, ready), without waiting for it
   * to become ready first; resolves with its record once it ended. Idempotent.
   */
  async close(id: string): Promise<SandboxRecord> {
    if (!(await this.get(id))) throw new SandboxNotFoundError(id);
    await this.ctx.requestClose(id);
    return this.ctx.waitEnded(id);
  }

  /** The sandbox's record, or null when no sandbox has this id. */
  async get(id: string): Promise<SandboxRecord | null> {
    const record = await this.ctx.store.get(id);
    return record ? sandboxRecordOf(record) : null;
  }

  /** Sandboxes, newest first, filtered by state, tenant and labels. */
  async list(listOptions: ListSandboxesOptions = {}): Promise<SandboxRecord[]> {
    const options = parseOptions(ListSandboxesOptionsSchema, listOptions, 'list options');
    const limit = options.limit ?? 100;
    const states = options.state ? jobStatesOf(options.state) : JobStateSchema.options;
    const found = new Map<string, SandboxRecord>();
    for (const state of states) {
      const records = await this.ctx.store.list({
        state,
        limit: 1000,
        ...(options.tenant ? { tenant: options.tenant } : {}),
      });
      for (const record of records) {
        const sandbox = sandboxRecordOf(record);
        if (!sandbox) continue;
        if (options.state && sandbox.state !== options.state) continue;
        if (!Object.entries(options.labels ?? {}).every(([k, v]) => sandbox.labels[k] === v)) continue;
        found.set(sandbox.id, sandbox);
      }
    }
    return [...found.values()].sort((a, b) => b.createdAt - a.createdAt).slice(0, limit);
  }
}

/** Polls the record until the sandbox takes commands; throws when it ended or is unknown. */
async function waitReady(
  store: JobStore,
  id: string,
  timeoutSeconds: number | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const deadline =
    timeoutSeconds === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutSeconds * 1000;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const record = await store.get(id);
    const sandbox = record ? sandboxRecordOf(record) : null;
    if (!sandbox) throw new SandboxNotFoundError(id);
    if (sandbox.state === 'ready') return;
    if (sandbox.state === 'closing' || sandbox.state === 'closed' || sandbox.state === 'failed') {
      throw new SandboxClosedError(id, sandbox.state, sandbox.reason, sandbox.message);
    }
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    if (Date.now() > deadline) {
      throw new SandboxTimeoutError(
        `sandbox ${id} not ready after ${timeoutSeconds} s (it is ${sandbox.state})`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** Polls until the sandbox is closed or failed (close() waits for its teardown to begin). */
export async function waitEnded(store: JobStore, id: string): Promise<SandboxRecord> {
  const deadline = Date.now() + CLOSE_WAIT_MS;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const record = await store.get(id);
    const sandbox = record ? sandboxRecordOf(record) : null;
    if (!record || !sandbox) throw new SandboxNotFoundError(id);
    if (isTerminal(record.state)) return sandbox;
    if (Date.now() > deadline)
      throw new SandboxTimeoutError(`sandbox ${id} still ${sandbox.state} after close`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}
