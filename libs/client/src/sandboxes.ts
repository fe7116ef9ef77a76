import {
  type LiveSandboxSpecInput,
  parseLiveSandboxSpec,
  type SandboxRecord,
  SandboxSpecError,
  SnapshotIdSchema,
} from '@sandstream/bus';
import { parseOptions } from './client-options.js';
import { Sandbox } from './sandbox.js';
import { SandboxNotFoundError, SnapshotNotFoundError } from './sandbox-errors.js';
import {
  type ConnectSandboxOptions,
  ConnectSandboxOptionsSchema,
  type CreateSandboxOptions,
  CreateSandboxOptionsSchema,
  type ListSandboxesOptions,
  ListSandboxesOptionsSchema,
} from './sandbox-options.js';
import type { CreatedSandbox, SandboxTransport } from './transport.js';

/**
 * Live sandboxes (`client.sandboxes`): create one and drive it command by command, reconnect to
 * one from another client, inspect and list them.
 */
export class Sandboxes {
  constructor(private readonly transport: SandboxTransport) {}

  /**
   * Creates a sandbox and resolves once its agent is alive and it takes commands. A bad spec
   * throws SandboxSpecError naming each field and rule, and nothing is queued; a start that
   * fails throws SandboxClosedError (state failed, reason start-failed, the backend's message).
   */
  async create(input: LiveSandboxSpecInput, createOptions: CreateSandboxOptions = {}): Promise<Sandbox> {
    return new Sandbox((await this.created(input, createOptions)).id, this.transport);
  }

  /**
   * Creates a sandbox as create() does and answers its record: the one the readiness wait read
   * when it turned ready (no second read), or, with `wait: false`, the record as queued. For
   * callers that answer with the record, such as the HTTP API.
   */
  async createRecord(
    input: LiveSandboxSpecInput,
    createOptions: CreateSandboxOptions = {},
  ): Promise<SandboxRecord> {
    const created = await this.created(input, createOptions);
    if (created.record) return created.record;
    const record = await this.transport.get(created.id);
    if (!record) throw new SandboxNotFoundError(created.id);
    return record;
  }

  private async created(
    input: LiveSandboxSpecInput,
    createOptions: CreateSandboxOptions,
  ): Promise<CreatedSandbox> {
    const options = parseOptions(CreateSandboxOptionsSchema, createOptions, 'create options');
    const given = input.fromSnapshot !== undefined ? await this.fromSnapshot(input) : input;
    const spec = parseLiveSandboxSpec(given);
    return this.transport.create(spec, given, options);
  }

  /**
   * The snapshot's spec under the one given (which wins field by field): a create from a snapshot
   * needs name nothing else, and starts on the image the snapshot's changes were made to.
   */
  private async fromSnapshot(input: LiveSandboxSpecInput): Promise<LiveSandboxSpecInput> {
    const snapshotId = input.fromSnapshot as string;
    // Looked up in the spec's tenant: another tenant's snapshot is not found (as pod-lifecycle finds it).
    const transport = input.tenant !== undefined ? this.transport.forTenant(input.tenant) : this.transport;
    const snapshot = SnapshotIdSchema.safeParse(snapshotId).success
      ? await transport.getSnapshot(snapshotId)
      : null;
    if (!snapshot) throw new SnapshotNotFoundError(snapshotId);
    const {
      id: _id,
      kind: _kind,
      fromSnapshot: _from,
      traceContext: _trace,
      ...inherited
    } = snapshot.spec as LiveSandboxSpecInput & { traceContext?: unknown };
    if (input.image !== undefined && inherited.image !== undefined && input.image !== inherited.image)
      throw new SandboxSpecError(
        `invalid sandbox spec: image: snapshot ${snapshotId} was taken on ${inherited.image}`,
        [`image: a sandbox from snapshot ${snapshotId} runs ${inherited.image}`],
      );
    const { image: _image, template: _template, ...rest } = input;
    return { ...inherited, ...rest } as LiveSandboxSpecInput;
  }

  /**
   * A handle on an open sandbox by id (waits while it is still being created). A paused one is
   * refused with SandboxPausedError, unless `resume: true` resumes it (and waits until ready).
   */
  async connect(id: string, connectOptions: ConnectSandboxOptions = {}): Promise<Sandbox> {
    const { resume, ...options } = parseOptions(
      ConnectSandboxOptionsSchema,
      connectOptions,
      'connect options',
    );
    if (resume) {
      const sandbox = await this.get(id);
      if (sandbox?.state === 'paused') await this.transport.resume(id, options);
    }
    await this.transport.connect(id, options);
    return new Sandbox(id, this.transport);
  }

  /** Resumes a paused sandbox by id (same id, its kept files); resolves once it is ready unless `wait` is false. */
  async resume(id: string, resumeOptions: CreateSandboxOptions = {}): Promise<Sandbox> {
    const options = parseOptions(CreateSandboxOptionsSchema, resumeOptions, 'resume options');
    await this.transport.resume(id, options);
    return new Sandbox(id, this.transport);
  }

  /**
   * A handle on a sandbox by id with no round trip: nothing is checked until it is used (a
   * command to a sandbox that is not ready is refused then, with the same typed errors). For
   * callers that check the record themselves, such as the HTTP API. With `tenant`, a command to
   * another tenant's sandbox is refused as one to a sandbox that does not exist, in the same
   * script that pushes it.
   */
  handle(id: string, options: { tenant?: string } = {}): Sandbox {
    if (options.tenant === undefined) return new Sandbox(id, this.transport);
    return new Sandbox(id, this.transport.forTenant(options.tenant));
  }

  /**
   * Closes a sandbox by id in any state (queued, being created, ready), without waiting for it
   * to become ready first; resolves with its record once it ended. Idempotent.
   */
  async close(id: string): Promise<SandboxRecord> {
    if (!(await this.get(id))) throw new SandboxNotFoundError(id);
    return this.transport.close(id);
  }

  /** The sandbox's record, or null when no sandbox has this id. */
  get(id: string): Promise<SandboxRecord | null> {
    return this.transport.get(id);
  }

  /** Sandboxes, newest first, filtered by state, tenant and labels. */
  list(listOptions: ListSandboxesOptions = {}): Promise<SandboxRecord[]> {
    return this.transport.list(parseOptions(ListSandboxesOptionsSchema, listOptions, 'list options'));
  }
}
