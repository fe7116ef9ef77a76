import { DispatchKeys, type JobStore, type KeySpace, parseLiveSandboxSpec } from '@sandstream/bus';
import { resultKey } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { advanceScript, idleScript, openScript } from '../dispatch-scripts.js';

/** A script's reply as ioredis hands it over. */
export type ScriptReply = (string | number)[];

export interface LiveSandboxFixtureOptions {
  redis: Redis;
  /** The test's namespace: record ids are `<ns>-s<n>`. */
  ns: string;
  keySpace: KeySpace;
  store: JobStore;
}

/**
 * Live sandboxes at the level of the dispatcher's scripts, straight against Redis: a record
 * brought to `running` as pod-lifecycle leaves it, and the script calls the dispatcher and the
 * agent would make on it. Shared by the tests of the live-sandbox and pause scripts.
 */
export function liveSandboxFixture({ redis, ns, keySpace, store }: LiveSandboxFixtureOptions) {
  const dispatchKeys = new DispatchKeys(keySpace, 2);
  const ids: string[] = [];
  let seq = 0;

  /** A live sandbox's record in `running`, not yet opened by the dispatcher. */
  async function runningSandbox(options: { idleSeconds?: number; onIdle?: 'close' | 'pause' } = {}) {
    const idleSeconds = options.idleSeconds ?? 60;
    const id = `${ns}-s${++seq}`;
    ids.push(id);
    await store.create(
      parseLiveSandboxSpec({ id, image: 'x', idleTimeoutSeconds: idleSeconds, onIdle: options.onIdle }),
    );
    for (const [from, to] of [
      ['queued', 'scheduled'],
      ['scheduled', 'starting'],
      ['starting', 'running'],
    ] as const) {
      await store.transition(id, [from], to);
    }
    const state = dispatchKeys.dispatchState(id);
    const k = keySpace.sandbox(id);
    const advance = (stepId: string) =>
      advanceScript.run<ScriptReply>(
        redis,
        [state, k.in, resultKey(k, stepId), keySpace.job(id)],
        [stepId, ''],
      );
    /** The agent's answer to a command: its result on its own key (a dispatcher records it). */
    const result = (stepId: string) =>
      redis.set(
        resultKey(k, stepId),
        JSON.stringify({
          schemaVersion: 1,
          stepId,
          exitCode: 0,
          timedOut: false,
          durationSeconds: 0,
          errorMessage: null,
        }),
      );
    return {
      id,
      /** The dispatcher's open; `ends` are the end and its cap it computed (endsAt, maxEndsAt). */
      open: (now = Date.now(), ends?: { endsAt: number; maxEndsAt: number }) =>
        openScript.run<ScriptReply>(
          redis,
          [state, keySpace.job(id), k.events],
          ends
            ? [now, idleSeconds * 1000, options.onIdle ?? 'close', 10_000, ends.endsAt, ends.maxEndsAt]
            : options.onIdle
              ? [now, idleSeconds * 1000, options.onIdle]
              : [now, idleSeconds * 1000],
        ),
      idle: (now: number) => idleScript.run<ScriptReply>(redis, [state, keySpace.job(id)], [now]),
      advance,
      result,
      /** A command's end, recorded by a dispatcher. */
      finishCommand: async (stepId: string) => {
        await result(stepId);
        return advance(stepId);
      },
    };
  }

  /** Deletes every record this fixture made and its dispatch state. */
  async function cleanup() {
    for (const id of ids) {
      await store.delete(id);
      await redis.unlink(dispatchKeys.dispatchState(id));
    }
  }

  return { dispatchKeys, runningSandbox, cleanup };
}
