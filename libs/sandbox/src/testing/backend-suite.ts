import { randomBytes } from 'node:crypto';
import { deleteNamespaceKeys, destroyTestSandbox } from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AgentConnection,
  type CreateSandboxRequest,
  type SandboxBackend,
  SandboxLabels,
  type SandboxRef,
  SandboxStartError,
} from '../backend.js';
import { type SandboxSpecInput, SandboxSpecSchema } from '../sandbox-spec.js';
import { secretEnvVariable } from '../secret-env.js';
import { ReadyListener } from './ready-listener.js';
import { StepChannel } from './step-channel.js';

export interface BackendSuiteOptions {
  /** Shown in the describe() title. */
  name: string;
  /** A reason to skip the whole suite (e.g. "no Docker engine"), or false/undefined to run it. */
  skip?: string | false;
  /** Redis as this test process reaches it. */
  redisUrl: string;
  /** Builds the backend under test. Called once for the suite and once more to act as "another replica". */
  createBackend: (redis: Redis) => SandboxBackend | Promise<SandboxBackend>;
  /** How the agent reaches Redis from inside the sandbox; redisUrl defaults to the one above, keyStyle to tagged. */
  agent?: Partial<AgentConnection>;
  /** A spec whose sandbox runs a working agent (image, and /bin/sh for the shell steps). */
  spec: SandboxSpecInput;
  /** Spec changes that make the sandbox exit before its agent heart-beats, printing `crashOutput`. */
  crashSpec?: Partial<SandboxSpecInput>;
  crashOutput?: string;
  crashExitCode?: number;
  /** Spec changes that make the sandbox run but never heart-beat. */
  hangSpec?: Partial<SandboxSpecInput>;
  /**
   * An image that does not exist where the backend looks (a name a registry the test started
   * does not have: a missing image is pulled first, and the engine's default registry cannot be
   * reached from every machine), or false to skip the case.
   */
  missingImage: string | false;
  /** Names of backend resources (directories, containers, volumes, pods) still present for a job. */
  leftovers?: (jobId: string) => Promise<string[]>;
  /** Deletes a persistent workspace after the test; without it the persistence test is skipped. */
  removePersistentWorkspace?: (name: string) => Promise<void>;
  /**
   * Whether spec.secretEnv can name a variable of the test process's environment (Docker,
   * in-process). Backends with their own secret store (Kubernetes) pass false.
   */
  secretsFromProcessEnv?: boolean;
  readyDeadlineMs?: number;
  /** Per-test timeout; container and pod backends need more than a child process. */
  testTimeoutMs?: number;
  graceMs?: number;
}

const suffix = () => randomBytes(4).toString('hex');

/**
 * Registers the contract every SandboxBackend must meet, against real Redis and whatever the
 * backend drives (child processes, Docker, a Kubernetes API). Each test uses its own job id.
 */
export function registerBackendSuite(options: BackendSuiteOptions): void {
  const title = `SandboxBackend contract: ${options.name}`;
  if (options.skip) {
    describe.skip(`${title} (skipped: ${options.skip})`, () => {
      it('needs its environment', () => {});
    });
    return;
  }

  describe(title, () => {
    const timeout = options.testTimeoutMs ?? 60_000;
    const readyDeadline = options.readyDeadlineMs ?? 30_000;
    const graceMs = options.graceMs ?? 3000;
    const secretName = `suite-${suffix()}`;
    const secretVar = secretEnvVariable(secretName);
    const secretValue = `s3cret-${suffix()}`;
    let redis: Redis;
    let blocking: Redis;
    let subscriber: Redis;
    let ready: ReadyListener;
    let backend: SandboxBackend;
    const created: SandboxRef[] = [];

    const request = (jobId: string, spec: Partial<SandboxSpecInput> = {}): CreateSandboxRequest => ({
      jobId,
      tenant: 'suite-tenant',
      spec: SandboxSpecSchema.parse({ ...options.spec, ...spec }),
      agent: {
        redisUrl: options.agent?.redisUrl ?? options.redisUrl,
        keyStyle: options.agent?.keyStyle ?? 'tagged',
        ...options.agent,
      },
    });
    const keyStyle = () => options.agent?.keyStyle ?? 'tagged';
    const channel = (jobId: string) => new StepChannel(redis, blocking, sandboxKeys(jobId, keyStyle()));
    const isAgentAlive = (jobId: string) => async () =>
      (await redis.exists(sandboxKeys(jobId, keyStyle()).heartbeat)) === 1;
    const newJobId = (what: string) => `suite-${what}-${suffix()}`;

    /**
     * What pod-lifecycle passes: the heartbeat check, and the announcement heard on the agent's
     * channel (a backend that waits otherwise, like Kubernetes on its pod watch, ignores it).
     */
    const readyOptions = async (jobId: string) => ({
      isAgentAlive: isAgentAlive(jobId),
      agentAnnounced: await ready.listen(jobId),
    });

    async function start(jobId: string, spec: Partial<SandboxSpecInput> = {}): Promise<SandboxRef> {
      const waitOptions = await readyOptions(jobId);
      const ref = await backend.create(request(jobId, spec));
      created.push(ref);
      await backend.waitReady(ref, readyDeadline, waitOptions);
      return ref;
    }

    /**
     * Destroys and asserts that nothing of the backend's is left: listing, backend resources. The
     * job's Redis keys are not the backend's (tearDownSandbox, libs/bus, frees them after destroy):
     * the test deletes them as its own.
     */
    async function destroyAndCheckClean(ref: SandboxRef): Promise<void> {
      await backend.destroy(ref, { graceMs });
      const listed = await backend.list();
      expect(listed.filter((s) => s.jobId === ref.jobId)).toEqual([]);
      if (options.leftovers) expect(await options.leftovers(ref.jobId)).toEqual([]);
      await deleteNamespaceKeys(redis, ref.jobId);
    }

    async function expectStartFailure(
      jobId: string,
      spec: Partial<SandboxSpecInput>,
      deadlineMs = readyDeadline,
    ): Promise<{ error: SandboxStartError; ref: SandboxRef | undefined }> {
      let ref: SandboxRef | undefined;
      try {
        const waitOptions = await readyOptions(jobId);
        ref = await backend.create(request(jobId, spec));
        created.push(ref);
        await backend.waitReady(ref, deadlineMs, waitOptions);
      } catch (err) {
        expect(err).toBeInstanceOf(SandboxStartError);
        return { error: err as SandboxStartError, ref };
      }
      throw new Error(`sandbox for ${jobId} became ready although it should have failed`);
    }

    beforeAll(async () => {
      process.env[secretVar] = secretValue;
      redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 3 });
      blocking = redis.duplicate();
      subscriber = redis.duplicate();
      ready = new ReadyListener(subscriber, keyStyle());
      backend = await options.createBackend(redis);
    });

    afterAll(async () => {
      // Whatever a failed test left behind goes, so one failure does not leak sandboxes.
      for (const ref of created) await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
      await backend?.close();
      blocking?.disconnect();
      subscriber?.disconnect();
      redis?.disconnect();
      delete process.env[secretVar];
    });

    it(
      'create -> ready -> steps through Redis -> destroy, leaving nothing behind',
      async () => {
        const jobId = newJobId('life');
        const spec: Partial<SandboxSpecInput> = {
          env: { ...options.spec.env, SUITE_VAR: `value-${jobId}` },
          labels: { ...options.spec.labels, 'suite-label': 'yes' },
        };
        if (options.secretsFromProcessEnv !== false) {
          spec.secretEnv = { SUITE_SECRET: { secretName, key: 'value' } };
        }
        const ref = await start(jobId, spec);
        expect(ref).toMatchObject({ jobId, backend: backend.kind });
        // The agent said it started (pod-lifecycle waits for that instead of polling).
        expect(ready.announced(jobId)).toBe(true);

        const listed = (await backend.list()).find((s) => s.jobId === jobId);
        expect(listed).toMatchObject({ jobId, tenant: 'suite-tenant', state: 'running' });
        expect(listed?.labels).toMatchObject({
          [SandboxLabels.jobId]: jobId,
          [SandboxLabels.tenant]: 'suite-tenant',
          [SandboxLabels.managedBy]: SandboxLabels.managedByValue,
          'suite-label': 'yes',
        });

        // A second create for the same job (redelivered after its caller crashed mid-start) is
        // never refused: it replaces the first, so there is one sandbox for the job, the new one,
        // and the steps below run in it (issue 27: refusing it failed the job).
        const waitAgain = await readyOptions(jobId);
        const again = await backend.create(request(jobId, spec));
        created.push(again);
        await backend.waitReady(again, readyDeadline, waitAgain);
        const mine = (await backend.list()).filter((s) => s.jobId === jobId);
        expect(mine).toHaveLength(1);
        expect(mine[0]?.id).toBe(again.id);
        // What pod-lifecycle's liveness prober asks for a late heartbeat: it runs (and, below,
        // no longer does once destroyed).
        if (backend.isRunning) expect(await backend.isRunning(again)).toBe(true);

        const steps = channel(jobId);
        const echo = await steps.run({
          schemaVersion: SCHEMA_VERSION,
          stepId: 'echo',
          kind: 'run',
          command: 'echo',
          args: [`hello-${jobId}`],
        });
        expect(echo).toMatchObject({ exitCode: 0, errorMessage: null });
        expect(await steps.stdout('echo')).toEqual([`hello-${jobId}`]);

        const written = await steps.run({
          schemaVersion: SCHEMA_VERSION,
          stepId: 'write',
          kind: 'writeFile',
          path: 'notes/a.txt',
          content: `written by ${jobId}\n`,
        });
        expect(written.errorMessage).toBeNull();
        const read = await steps.run({
          schemaVersion: SCHEMA_VERSION,
          stepId: 'read',
          kind: 'readFile',
          path: 'notes/a.txt',
        });
        expect(read.output).toMatchObject({ kind: 'readFile', content: `written by ${jobId}\n` });

        // spec.env and resolved secretEnv reach the sandbox; the backend's own environment does not.
        const env = await steps.run({
          schemaVersion: SCHEMA_VERSION,
          stepId: 'env',
          kind: 'run',
          shell: true,
          command: `echo "var=$SUITE_VAR secret=$SUITE_SECRET leaked=$${secretVar}"`,
        });
        expect(env.exitCode).toBe(0);
        const expectedSecret = options.secretsFromProcessEnv !== false ? secretValue : '';
        expect(await steps.stdout('env')).toEqual([`var=value-${jobId} secret=${expectedSecret} leaked=`]);

        await destroyAndCheckClean(ref);
        if (backend.isRunning) expect(await backend.isRunning(again)).toBe(false);
        // Idempotent: the second destroy of a gone sandbox succeeds.
        await backend.destroy(ref, { graceMs });
      },
      timeout,
    );

    it(
      'another backend instance (another replica) lists and destroys what this one created',
      async () => {
        const jobId = newJobId('replica');
        const ref = await start(jobId);
        const otherRedis = new Redis(options.redisUrl);
        const other = await options.createBackend(otherRedis);
        try {
          const listed = (await other.list()).find((s) => s.jobId === jobId);
          expect(listed).toMatchObject({ jobId, id: ref.id, backend: backend.kind });
          // The other replica destroys by job id and id alone, as a reaper or a new leader would.
          await other.destroy({ jobId, backend: ref.backend, id: ref.id }, { graceMs });
          expect((await backend.list()).filter((s) => s.jobId === jobId)).toEqual([]);
          await destroyAndCheckClean(ref);
        } finally {
          await other.close();
          otherRedis.disconnect();
        }
      },
      timeout,
    );

    it.skipIf(!options.removePersistentWorkspace)(
      'a persistent workspace outlives destroy and is found by the next job naming it',
      async () => {
        const name = `suite-ws-${suffix()}`;
        const jobIds = [newJobId('ws1'), newJobId('ws2')];
        try {
          const first = await start(jobIds[0] as string, { persistentWorkspace: { name } });
          const written = await channel(first.jobId).run({
            schemaVersion: SCHEMA_VERSION,
            stepId: 'keep',
            kind: 'writeFile',
            path: 'kept.txt',
            content: 'still here',
          });
          expect(written.errorMessage).toBeNull();
          await destroyAndCheckClean(first);

          const second = await start(jobIds[1] as string, { persistentWorkspace: { name } });
          const read = await channel(second.jobId).run({
            schemaVersion: SCHEMA_VERSION,
            stepId: 'again',
            kind: 'readFile',
            path: 'kept.txt',
          });
          expect(read.output).toMatchObject({ kind: 'readFile', content: 'still here' });
          await destroyAndCheckClean(second);
        } finally {
          // A failed start leaves its sandbox holding the workspace; it must go before the workspace can.
          for (const ref of created.filter((r) => jobIds.includes(r.jobId))) {
            await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
          }
          await options.removePersistentWorkspace?.(name);
        }
      },
      timeout,
    );

    it(
      "a tenant's volume outlives destroy: written by one sandbox, read by the next read-only, then removed",
      async () => {
        // Every backend has volumes (docs/volumes.md).
        expect(backend.removeVolume).toBeTypeOf('function');
        const source = `sandstream-vol-${randomBytes(8).toString('hex')}`;
        const volume = { source, volume: 'suite', mountPath: '/vol' };
        const jobIds = [newJobId('vol1'), newJobId('vol2')];
        try {
          const first = await start(jobIds[0] as string, { volumes: [volume] });
          const written = await channel(first.jobId).run({
            schemaVersion: SCHEMA_VERSION,
            stepId: 'keep',
            kind: 'writeFile',
            path: '/vol/kept.txt',
            content: 'on the volume',
          });
          expect(written.errorMessage).toBeNull();
          await destroyAndCheckClean(first);

          const second = await start(jobIds[1] as string, { volumes: [{ ...volume, readOnly: true }] });
          const read = await channel(second.jobId).run({
            schemaVersion: SCHEMA_VERSION,
            stepId: 'again',
            kind: 'readFile',
            path: '/vol/kept.txt',
          });
          expect(read.output).toMatchObject({ kind: 'readFile', content: 'on the volume' });
          await destroyAndCheckClean(second);
        } finally {
          for (const ref of created.filter((r) => jobIds.includes(r.jobId))) {
            await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
          }
          await backend.removeVolume?.(source);
        }
      },
      timeout,
    );

    it(
      'an agent that crashes fails the start with agent_crashed, its exit code and its last output',
      async () => {
        const output = options.crashOutput ?? 'sandstream-suite: agent exploded';
        const code = options.crashExitCode ?? 7;
        const { error, ref } = await expectStartFailure(
          newJobId('crash'),
          options.crashSpec ?? { command: ['/bin/sh', '-c', `echo '${output}' >&2; exit ${code}`] },
        );
        expect(error.reason).toBe('agent_crashed');
        expect(error.message).toContain(output);
        expect(error.message).toContain(`exit code ${code}`);
        if (ref) await destroyAndCheckClean(ref);
      },
      timeout,
    );

    it(
      'a sandbox whose agent never heart-beats fails at the start deadline',
      async () => {
        const deadlineMs = 1500;
        const started = Date.now();
        const { error, ref } = await expectStartFailure(
          newJobId('hang'),
          options.hangSpec ?? { command: ['/bin/sh', '-c', 'sleep 300'] },
          deadlineMs,
        );
        expect(error.reason).toBe('deadline');
        expect(Date.now() - started).toBeGreaterThanOrEqual(deadlineMs);
        if (ref) await destroyAndCheckClean(ref);
      },
      timeout,
    );

    it.skipIf(options.missingImage === false)(
      'a missing image fails fast with image_not_found and an operator-facing message',
      async () => {
        const image = options.missingImage as string;
        const jobId = newJobId('noimage');
        const started = Date.now();
        const { error, ref } = await expectStartFailure(jobId, { image });
        expect(error.reason).toBe('image_not_found');
        expect(error.message).toContain(image);
        // Fast: a missing image is not a reason to wait for the start deadline.
        expect(Date.now() - started).toBeLessThan(readyDeadline);
        if (ref) await destroyAndCheckClean(ref);
        else if (options.leftovers) expect(await options.leftovers(jobId)).toEqual([]);
      },
      timeout,
    );

    it('refuses a bad job id with a message naming the field', async () => {
      await expect(backend.create(request('{bad id}'))).rejects.toThrow(/jobId/);
    });
  });
}
