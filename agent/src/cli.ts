/**
 * The agent's command line (loaded by main.ts once V8 is tuned): pulls Steps from Redis, runs
 * them, streams their output back.
 *
 *   sandstream-agent --redis-url redis://host:6379 --job-id pipe-42 [--verbose]
 *   sandstream-agent --inject /shared            (init-container: copy the agent, exit 0)
 *
 * Exit codes: 0 shutdown step, or SIGTERM/SIGINT handled cleanly (running step killed, its
 * events and result delivered, heartbeat deleted); 2 idle limit reached; 3 bad configuration
 * or fatal error, including a stop that could not finish within the shutdown grace period.
 * All flags and their environment equivalents are in config.ts.
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { dropAgentOnlyEnv, RawListConnection, rawOptionsFromUrl, sandboxKeys } from '@sandstream/wire/lean';
import { AgentLoop } from './agent-loop.js';
import { awaitClaim } from './await-claim.js';
import { ConfigError, parseConfig, type RunConfig } from './config.js';
import { ExitCode } from './exit-codes.js';
import { createLogger, type Logger } from './logger.js';
import { DeferredLauncher } from './process/deferred-launcher.js';
import type { ProcessLauncher } from './process/launcher.js';
import { locateSpawner } from './process/locate-spawner.js';
import { NodeLauncher } from './process/node-launcher.js';
import { releaseStartupBlob } from './process/release-startup-blob.js';
import { SpawnerLauncher } from './process/spawner-launcher.js';
import { warmThreadPool } from './process/warm-thread-pool.js';
import { closeNow, openConnections } from './redis-connections.js';
import { createStepExecutor, type StepExecutor } from './steps/execute-step.js';
import { StdinChannel } from './steps/stdin-stream.js';
import { TerminalChannel } from './steps/terminal-channel.js';
import { TransferChannel } from './steps/transfer-channel.js';
import { stepTracerFromEnv } from './tracing/step-span.js';

/** How long a SIGTERM/SIGINT stop may take (Redis unreachable, say) before we give up. */
const SHUTDOWN_GRACE_MS = 10_000;

/** Runs the agent as the command line asks; resolves with the process exit code. */
export async function runCli(): Promise<number> {
  // What the backend set for the agent alone (one malloc arena) never reaches a step.
  dropAgentOnlyEnv(process.env);
  let command: ReturnType<typeof parseConfig>;
  try {
    command = parseConfig(process.argv.slice(2), process.env, process.cwd());
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    createLogger({ verbose: false }).error(`invalid configuration: ${err.message}`);
    return ExitCode.fatal;
  }
  if (command.mode === 'inject') {
    // Imported lazily: injection is a different job (copying files), and the run mode must not
    // pay for or depend on it.
    const { injectAgent } = await import('./inject.js');
    await injectAgent(command.targetDir);
    return ExitCode.ok;
  }
  const log = createLogger({ verbose: command.verbose, base: { jobId: command.jobId } });
  const workdir = resolve(command.workdir);
  if (!isDirectory(workdir)) {
    log.error(`invalid configuration: --workdir ${workdir} is not a directory`);
    return ExitCode.fatal;
  }
  if (command.awaitClaim) return runPoolMember({ ...command, workdir }, log);
  return runAgent({ ...command, workdir }, log);
}

/**
 * A warm pool member: everything that can be done before the job is known (the spawner check,
 * the module loading) is done, then it waits for its claim and runs as the claimed job.
 */
async function runPoolMember(config: RunConfig, log: Logger): Promise<number> {
  // Installed before the first await (main.ts's early handlers are gone by now): a stop at any
  // moment of the wait, Redis reachable or not, is a clean exit 0.
  const stop = new AbortController();
  const onStop = () => stop.abort();
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  const offStop = () => {
    process.off('SIGTERM', onStop);
    process.off('SIGINT', onStop);
  };
  let launcher: ProcessLauncher;
  try {
    launcher = await createLauncher(locateSpawner(config.spawner), log);
    // A member idles until its claim: the blob's pages are given back before that, not after.
    warmThreadPool();
    releaseStartupBlob(log);
  } catch (err) {
    offStop();
    log.error(`invalid configuration: ${(err as Error).message}`);
    return ExitCode.fatal;
  }
  const wait = await awaitClaim(config, log, stop.signal).finally(offStop);
  if (wait.kind !== 'claimed') {
    launcher.close();
    if (wait.kind === 'stopped') return ExitCode.ok;
    log.error(wait.message);
    return ExitCode.fatal;
  }
  const jobLog = createLogger({
    verbose: config.verbose,
    base: { jobId: wait.config.jobId, member: config.jobId },
  });
  jobLog.info('claimed from a warm pool', {
    ...(wait.claim.claimedAt !== undefined ? { claimToBoundMs: Date.now() - wait.claim.claimedAt } : {}),
    ...(wait.claim.traceContext ? { traceparent: wait.claim.traceContext.traceparent } : {}),
  });
  return runAgent(wait.config, jobLog, launcher);
}

/** How long the spawner helper has to answer its first PING before the agent does without it. */
const SPAWNER_READY_TIMEOUT_MS = 2_000;

/**
 * The native spawner when it is there and runs (run steps then never fork the agent), Node's own
 * child_process otherwise. `located` is locateSpawner's answer.
 */
async function createLauncher(
  located: ReturnType<typeof locateSpawner>,
  log: Logger,
): Promise<ProcessLauncher> {
  if (located.path === null) {
    log.info('run steps start through node:child_process', { reason: located.reason });
    return new NodeLauncher();
  }
  const launcher = new SpawnerLauncher(located.path, log);
  if (!(await launcher.ready(SPAWNER_READY_TIMEOUT_MS))) {
    // A helper that cannot run here (a runtime refusing a system call it needs, say) must not
    // cost the job its steps: they are slower through child_process, but they run.
    launcher.close();
    log.warn('the spawner helper did not answer; run steps start through node:child_process', {
      path: located.path,
    });
    return new NodeLauncher();
  }
  log.debug('run steps start through the spawner', { path: located.path, pid: launcher.helperPid });
  return launcher;
}

/**
 * The launcher, made once the first heartbeat is in Redis (AgentLoop's onStarted) or by the
 * first step that needs it: what a sandbox waits for goes out first, and the helper (a fork and
 * its first PING, a few ms of CPU) starts while the dispatcher sends the first step. A helper
 * that cannot start costs the job nothing but speed: run steps then go through child_process.
 */
function launcherAfterBoot(located: () => ReturnType<typeof locateSpawner>, log: Logger): DeferredLauncher {
  return new DeferredLauncher(() =>
    Promise.resolve()
      .then(() => createLauncher(located(), log))
      .catch((err: Error) => {
        log.warn('the spawner helper could not start; run steps start through node:child_process', {
          error: err.message,
        });
        return new NodeLauncher();
      }),
  );
}

async function runAgent(config: RunConfig, log: Logger, ready?: ProcessLauncher): Promise<number> {
  let launcher: DeferredLauncher;
  try {
    // A --spawner path is checked now (a bad one is a configuration error, exit 3). The search
    // `auto` makes cannot fail, and its first run costs ~0.8 ms of CPU: it is done after the boot.
    const given = config.spawner === 'auto' ? null : locateSpawner(config.spawner);
    launcher = ready
      ? new DeferredLauncher(async () => ready, ready)
      : launcherAfterBoot(() => given ?? locateSpawner('auto'), log);
  } catch (err) {
    log.error(`invalid configuration: ${(err as Error).message}`);
    return ExitCode.fatal;
  }
  let releaseTimer: NodeJS.Timeout | undefined;
  // From here to process.on(…, onSignal) below everything runs synchronously: no gap.
  const connections = openConnections(config.redisUrl, config.jobId, log);
  // Transfers and terminals block on connections of their own, as this sandbox's Redis user.
  const ownConnection = () => {
    const connection = connections.writer.duplicate();
    connection.on('error', () => {});
    return connection;
  };
  // Step spans go to OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT when set; a no-op otherwise.
  const stepTracer = stepTracerFromEnv(process.env, config.jobId);
  if (stepTracer.warning) log.warn(stepTracer.warning);
  const loop = new AgentLoop({
    jobId: config.jobId,
    keys: sandboxKeys(config.jobId, config.keyStyle),
    connections,
    execute: stepTracer.wrap(
      lazyExecutor(() =>
        launcher.start().then((started) =>
          createStepExecutor({
            launcher: started,
            // Uploads and downloads block on their own connection, as this sandbox's Redis user.
            transfers: new TransferChannel(sandboxKeys(config.jobId, config.keyStyle), () =>
              RawListConnection.open(rawOptionsFromUrl(config.redisUrl)),
            ),
            terminals: new TerminalChannel(sandboxKeys(config.jobId, config.keyStyle), ownConnection),
            stdin: new StdinChannel(sandboxKeys(config.jobId, config.keyStyle), ownConnection),
          }),
        ),
      ),
    ),
    log,
    workdir: config.workdir,
    confineFiles: config.confineFiles,
    confineAllow: config.confineAllow,
    idleTimeoutSeconds: config.idleTimeoutSeconds,
    maxIdleWaits: config.maxIdleWaits,
    maxParallelSteps: config.maxParallelSteps,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    authRetryMs: config.authRetrySeconds * 1000,
    eventBufferLines: config.eventBufferLines,
    eventBufferBytes: config.eventBufferBytes,
    notifyStream: config.notifyStream,
    notifyStreamMaxLength: config.notifyStreamMaxLength,
    logArchiveHighWater: config.logArchive ? config.logArchiveHighWater : undefined,
    redisRateLimit: config.redisRateLimit,
    onStarted: () => {
      void launcher.start();
      warmThreadPool();
      // Not at once: an agent gone within the delay (a short job's) never pays for it.
      releaseTimer = setTimeout(() => releaseStartupBlob(log), config.memoryReleaseDelayMs);
      releaseTimer.unref();
    },
  });

  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      log.error('second signal, exiting without waiting', { signal });
      process.exit(ExitCode.fatal);
    }
    signalled = true;
    loop.stop(signal);
    // If Redis is gone the result cannot be delivered; do not hang past the pod's grace period.
    setTimeout(() => {
      log.error('shutdown did not finish in time, exiting', { graceMs: SHUTDOWN_GRACE_MS });
      process.exit(ExitCode.fatal);
    }, SHUTDOWN_GRACE_MS).unref();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const onFatal = (err: unknown) => {
    log.error('fatal error', { error: err });
    // Abort the running step so its executor kills the process group before we go.
    loop.stop('fatal error');
    closeNow(connections.writer);
    process.exit(ExitCode.fatal);
  };
  process.on('uncaughtException', onFatal);
  process.on('unhandledRejection', onFatal);

  try {
    const code = await loop.run();
    clearTimeout(releaseTimer);
    await launcher.close();
    // Bounded: an unreachable collector must not delay the exit the pod is waiting for.
    await stepTracer.flush(2_000);
    log.info('agent exiting', { exitCode: code });
    return code;
  } catch (err) {
    onFatal(err);
    return ExitCode.fatal;
  }
}

/** An executor made on the first step that comes before it was (each later step reuses it). */
function lazyExecutor(make: () => Promise<StepExecutor>): StepExecutor {
  let made: Promise<StepExecutor> | null = null;
  return async (step, ctx) => {
    made ??= make();
    return (await made)(step, ctx);
  };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
