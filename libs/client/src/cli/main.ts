#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import { startupSnapshot } from 'node:v8';
import {
  ApiKeyStore,
  FileTemplateError,
  isTerminal,
  type JobRecord,
  type JobSpec,
  JobSpecSchema,
  JobStateSchema,
  SandboxSpecError,
  sandboxRecordOf,
  TemplateNotFoundError,
  VolumeInUseError,
  VolumeNotFoundError,
} from '@sandstream/bus';
import type { StepResult } from '@sandstream/wire';
import { type ListOptions, SandstreamClient } from '../client.js';
import { SandstreamOptionsError, type SandstreamWarning } from '../client-options.js';
import { infrastructureErrorOf } from '../infrastructure-errors.js';
import { JobNotFoundError } from '../job-not-found.js';
import {
  SandboxClosedError,
  SandboxCommandNotFoundError,
  SandboxFileError,
  SandboxLimitError,
  SandboxNotFoundError,
  SnapshotNotFoundError,
} from '../sandbox-errors.js';
import { apiKeyCommand } from './api-key-commands.js';
import { type CliRedis, connectCliRedis } from './connect-redis.js';
import { NatsUrlSchema, redactUrl, resolveApiConnection, resolveConnection } from './connection-config.js';
import { CopyPathNotFoundError, CopyRefusedError, copyFiles } from './copy-command.js';
import { ExitCodes, exitCodeFor } from './exit-codes.js';
import { type ParsedCommandLine, parseCommandLine, UsageError } from './flags.js';
import { describeOutput, TimelineRenderer } from './render.js';
import { runCodeInSandbox } from './run-code-command.js';
import {
  historyCommand,
  keepAliveCommand,
  processesCommand,
  statsCommand,
} from './sandbox-activity-commands.js';
import {
  createSandbox,
  createSpec,
  execInSandbox,
  inspectSandbox,
  listSandboxes,
  pauseSandbox,
  removeSandbox,
  resumeSandbox,
  shellInSandbox,
} from './sandbox-commands.js';
import { networkPolicyOf, updateSandboxNetwork } from './sandbox-network-command.js';
import { setSandboxTimeout } from './sandbox-timeout-command.js';
import { printPortUrl } from './sandbox-url-command.js';
import {
  createSnapshot,
  forkCount,
  forkSandbox,
  listSnapshots,
  removeSnapshot,
  restoreSandbox,
} from './snapshot-commands.js';
import { SpecFileError } from './spec-file-error.js';
import { startCliTelemetry } from './telemetry.js';
import { templateBuild, templateBuildInputs, templateList, templateRemove } from './template-commands.js';
import { volumeCommand } from './volume-commands.js';

const USAGE = `Usage: sandstream <command> [options]

Commands:
  submit <job.yaml> [--follow]   validate and submit a job; --follow streams its output and
                                 exits with the job's outcome
  logs [-f] <jobId>              print a job's output (-f: keep following until it ends);
                                 lines no longer held are marked where they were; without
                                 -f, read from the log archive once Redis lost some
  status <jobId> [--json]        show a job's state and step results
  cancel <jobId>                 cancel a job (a running step is killed)
  ls [--tenant t] [--state s] [--json]
                                 list jobs and sandboxes (newest first)

  sandbox create <image> | --template <t> [--id <id>] [--env K=V]… [--label K=V]…
          [--idle-timeout <s>] [--timeout <s>] [--tenant <t>] [--volume <name>:<path>[:ro]]…
                                 create a live sandbox; prints its id alone once it is ready;
                                 --volume mounts a volume (read-write: one sandbox at a time)
  sandbox ls [--state s] [--label K=V]… [--tenant t] [--json]
  sandbox inspect <id> [--json]  a sandbox's state, limits and activity
  sandbox rm <id>                close it (kills what still runs in it)
  sandbox pause <id>             pause it: files, id, spec kept; its slot and sandbox freed;
                                 prints "<id> paused" and any command it stopped
  sandbox resume <id> [--timeout s]
                                 resume a paused sandbox under the same id; prints its id once ready
  sandbox create --from-snapshot <snapshotId>
                                 a sandbox that starts with a snapshot's files; prints its id
  sandbox restore <id> <snapshotId>
                                 make its files exactly the snapshot's (running commands stopped)
  sandbox fork <id> --count <n>  n new sandboxes (≤ 100) with its files; prints their ids, one a line
  snapshot create <id> [--name <n>]
                                 snapshot a sandbox's files; prints the snapshot id alone
  snapshot ls [--json]           the tenant's snapshots
  snapshot rm <snapshotId>       delete a snapshot
  sandbox set-timeout <id> <seconds>
                                 it now ends <seconds> from now (sooner or later than before),
                                 capped at the operator's maximum lifetime; prints when
  sandbox network <id> --allow <cidr|host:port|domain>… | --none | --internet
                                 change a running sandbox's egress policy; prints the policy applied
                                 (--allow repeats or takes a comma-separated list)
  sandbox stats <id> [--json]    CPU, memory, disk and workspace use; commands run and running
  sandbox history <id> [--json]  the commands in its (bounded) history and how each ended
  sandbox keepalive <id>         its idle expiry starts again, as after a command
  ps <id> [--json]               its background processes still running
  ps <id> --kill <processId>     kill one (its whole process tree); not running: exit 4
  sandbox url <id> <port> [--public] [--host]
                                 a preview URL of a port the sandbox serves on, printed alone
                                 (private: it carries its token; --host: {port}-{label}.{domain};
                                 over Redis the API's address comes from SANDSTREAM_API_URL)
  exec [--shell] [--cwd <dir>] [--env K=V]… [--timeout <s>] <id> -- <command> [args…]
                                 run a command in a sandbox with live output; exits with the
                                 command's code (124 timed out, 130 cancelled, 125 Sandstream failed)
  run-code [--language python|javascript|bash] [--context <c>] [--timeout <s>] <id> -- <code>
                                 run a cell in the sandbox's code interpreter (state kept per
                                 context); prints its output and the main result; exits 1 when
                                 it raised (traceback on stderr), 124 timed out (state kept)
  cp <src> <id>:<path> | cp <id>:<path> <dst>
                                 copy a file or directory into or out of a sandbox, by docker
                                 cp's rules: a file onto a missing path is written as that path;
                                 a directory arrives under its own name in an existing
                                 directory, as the new directory otherwise; <src>/. copies its
                                 contents (a missing path exits 4)
  volume create <name> [--size <bytes|Gi…>] [--tenant <t>]
                                 create a volume that outlives sandboxes; prints its name
  volume ls [--tenant <t>] [--json]
                                 the tenant's volumes, their size limits and who mounts them
  volume rm <name> [--tenant <t>]
                                 delete a volume (refused while a sandbox mounts it)
  template build <name> [-f <Dockerfile>] <dir>
                                 build an image with the Docker engine (docker CLI, DOCKER_HOST)
                                 and register it as template <name> for every scheduler; prints
                                 its image. Kubernetes takes images from CI (docs/templates.md)
                                 (Redis only: no build over --url)
  template ls [--json]           the templates: name, source, image, when built. Over --url
                                 the API's (the templates file's and the built ones); over
                                 Redis the built ones
  template rm <name>             unregister built template <name> (its image stays on the
                                 engine for sandboxes that run it); exits 4 if there is none,
                                 1 for a templates-file one; over --url an admin key's only
  apikey create --tenant <t> [--admin]
                                 a key for the HTTP API (services/api), printed alone on
                                 stdout (only its hash is kept); --admin sees every tenant
  apikey ls [--json]             the API keys: id, tenant, admin, created (never the keys)
  apikey revoke <id>             the key stops working at once
  mcp [--image <img> | --template <t>]
                                 an MCP server on stdin/stdout (for AI agents: Claude, IDEs):
                                 tools to create sandboxes and run commands and file calls in
                                 them, on this connection (--url/--api-key, or Redis); closes
                                 the sandboxes it created when its client goes away; --image /
                                 --template: what create_sandbox runs when the call names none
  shell <id> [--session <name>]  on a terminal: an interactive terminal (PTY) in the sandbox,
                                 exits with its shell's code; piped, or with --session: a
                                 long-lived shell, one command line at a time from stdin, its
                                 cd and exports kept; exits with the last command's code

Options:
  --url <url>         the HTTP API (services/api) instead of Redis, for use outside the
                      cluster; default $SANDSTREAM_URL. Not with --redis-url / --namespace
  --api-key <key>     its API key (a bearer token); default $SANDSTREAM_API_KEY (safer:
                      a flag shows in ps). None: the API's anonymous access, if it allows it
  --redis-url <url>   default $REDIS_URL, then the Redis that \`npm start\` runs (found
                      through .cache/sandstream/local.json), then redis://127.0.0.1:6379
  --nats-url <url>    the log archive (NATS JetStream) \`logs\` reads once Redis no longer
                      holds a job's whole log; default $NATS_URL, then npm start's (with
                      its Redis only), else none
  --namespace <ns>    default $SANDSTREAM_NAMESPACE, then npm start's, then sandstream
  -h, --help

Exit codes: 0 succeeded, 1 failed, 2 usage or invalid job file, 3 Redis, the API or other
infrastructure error, 4 job or sandbox not found, 124 timed out, 130 cancelled.`;

/**
 * How long `logs -f` / `submit --follow` wait for a Redis that went away before giving up with
 * one line and exit 3: long enough for a restart, short enough for a person at the terminal.
 */
const FOLLOW_OUTAGE_LIMIT_MS = 20_000;

/** A job id that does not exist in this namespace (exit 4). */
class NotFoundError extends Error {}

/**
 * The CLI's own directory (libs/client/dist/cli, or the bundle's): walking up from it reaches the
 * repo root, where `npm start` writes local.json, from whatever directory the CLI is run. Read
 * when used: in the start-up snapshot, load time was the build.
 */
const cliDir = () => fileURLToPath(new URL('.', import.meta.url));

/** The command being run: `exec` reports Sandstream's own failures as 125, not 3. */
let currentCommand: string | undefined;

/** Set once connected, so a "lost Redis" message can name the URL and the socket's reason. */
let connection: (CliRedis & { url: string }) | undefined;

async function main(argv: string[]): Promise<number> {
  const { command, args, commandLine, values } = parseCommandLine(argv);
  const [arg] = args;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command || values.help ? ExitCodes.succeeded : ExitCodes.usage;
  }
  const needArg = (what: string) => {
    if (!arg) throw new UsageError(`${command} needs a ${what}`);
    return arg;
  };
  currentCommand = command;
  // Usage is checked and the file validated before connecting anywhere: a bad command line or
  // spec costs no round trip.
  if (command === 'cp') {
    if (args.length !== 2)
      throw new UsageError(
        'cp needs a source and a destination: cp <src> <id>:<path> or cp <id>:<path> <dst>',
      );
  } else if (
    command === 'ls' ||
    command === 'sandbox ls' ||
    command === 'apikey ls' ||
    command === 'volume ls' ||
    command === 'snapshot ls' ||
    command === 'mcp'
  ) {
    if (arg) throw new UsageError(`${command} takes no arguments (got "${arg}")`);
  } else if (command === 'sandbox create') {
    createSpec(arg, values);
  } else if (command === 'template build') {
    templateBuildInputs(args, values);
  } else if (command === 'template ls') {
    if (arg) throw new UsageError(`template ls takes no arguments (got "${arg}")`);
  } else if (command === 'template rm') {
    needArg('template name');
  } else if (command === 'apikey create') {
    if (arg) throw new UsageError(`apikey create takes no arguments (got "${arg}"); the tenant is --tenant`);
    if (!values.tenant) throw new UsageError('apikey create needs --tenant <t>');
  } else if (command === 'apikey revoke') {
    needArg('key id');
  } else if (command === 'volume create' || command === 'volume rm') {
    needArg('volume name');
  } else if (command === 'snapshot rm') {
    needArg('snapshot id');
  } else if (command === 'sandbox restore') {
    needArg('sandbox id');
    if (!args[1]) throw new UsageError('sandbox restore needs a sandbox id and a snapshot id');
  } else if (command === 'sandbox fork') {
    needArg('sandbox id');
    forkCount(values.count);
  } else if (command === 'sandbox network') {
    needArg('sandbox id');
    networkPolicyOf(values);
  } else if (
    command === 'sandbox inspect' ||
    command === 'sandbox rm' ||
    command === 'sandbox pause' ||
    command === 'sandbox resume' ||
    command === 'snapshot create' ||
    command === 'sandbox url' ||
    command === 'sandbox set-timeout' ||
    command === 'sandbox stats' ||
    command === 'sandbox history' ||
    command === 'sandbox keepalive' ||
    command === 'ps' ||
    command === 'exec' ||
    command === 'shell'
  ) {
    needArg('sandbox id');
  } else needArg(command === 'submit' ? 'job file' : 'job id');
  const listOptions = command === 'ls' ? parseListFlags(values) : undefined;
  // The YAML parser (load-spec-file) and NATS (print-logs) load only for the commands that use
  // them: every other command's start-up skips them (issue 33, CLI start-up).
  const specFile =
    command === 'submit'
      ? await (await import('./load-spec-file.js')).loadSpecFile(needArg('job file'))
      : null;

  const api = resolveApiConnection({
    flags: {
      url: values.url,
      apiKey: values['api-key'],
      redisUrl: values['redis-url'],
      namespace: values.namespace,
    },
    env: process.env,
  });
  if (api && command.startsWith('apikey '))
    throw new UsageError(`${command} manages keys in Redis directly: give --redis-url, not --url`);
  // A build tags an image on the engine the CLI reaches and registers it in Redis itself: there is
  // no build over the API. Listing and removing go through the SDK, on either transport.
  if (api && command === 'template build')
    throw new UsageError(`${command} registers templates in Redis directly: give --redis-url, not --url`);
  // Only submit starts a trace. Off unless the services' switch (SANDSTREAM_TELEMETRY / an OTLP
  // endpoint) is set; the SDK is loaded only then, so the CLI pays nothing by default.
  const telemetry = command === 'submit' ? await startCliTelemetry() : undefined;
  const onWarning = (warning: SandstreamWarning) => {
    if (warning.code === 'no-scheduler') {
      process.stderr.write(
        `sandstream: warning: no scheduler is connected to namespace "${warning.namespace}" ` +
          '(is npm start running, and is --namespace right?)\n',
      );
    } else process.stderr.write(`sandstream: warning: ${warning.message}\n`);
  };
  let cli: CliRedis | undefined;
  let natsUrl: string | undefined;
  let client: SandstreamClient;
  if (api) {
    client = new SandstreamClient({ url: api.url, ...(api.apiKey ? { apiKey: api.apiKey } : {}), onWarning });
  } else {
    const resolved = resolveConnection({
      flags: { redisUrl: values['redis-url'], namespace: values.namespace, natsUrl: values['nats-url'] },
      env: process.env,
      searchFrom: [process.cwd(), cliDir()],
    });
    if (resolved.warning) process.stderr.write(`sandstream: warning: ${resolved.warning}\n`);
    if (resolved.natsUrl !== undefined && !NatsUrlSchema.safeParse(resolved.natsUrl).success)
      throw new UsageError(
        `--nats-url / NATS_URL "${redactUrl(resolved.natsUrl)}" is not a NATS URL (nats://host:port)`,
      );
    natsUrl = resolved.natsUrl;
    cli = await connectCliRedis(resolved.redisUrl, { source: resolved.urlFile });
    connection = { ...cli, url: resolved.redisUrl };
    client = new SandstreamClient({ redis: cli.redis, namespace: resolved.namespace, onWarning });
  }
  try {
    switch (command) {
      case 'submit': {
        const { jobId, created } = await client.submit(specFile);
        process.stderr.write(`${created ? 'submitted' : 'already submitted'} ${jobId}\n`);
        // The id alone on stdout is for JOB=$(sandstream submit …); on a terminal, where both
        // streams show, the line above already said it (npm start's demo printed it twice).
        if (!(process.stdout.isTTY && process.stderr.isTTY)) process.stdout.write(`${jobId}\n`);
        if (!values.follow) return ExitCodes.succeeded;
        return await followJob(client, jobId);
      }
      case 'logs': {
        const jobId = needArg('job id');
        if (values.follow) return await followJob(client, jobId);
        if (!cli) {
          // Over the API the log is its event stream, up to where it is now.
          await followJob(client, jobId, { untilNow: true });
          return ExitCodes.succeeded;
        }
        const { printLogs } = await import('./print-logs.js');
        await printLogs(
          client,
          jobId,
          { natsUrl, subjectPrefix: process.env.NATS_SUBJECT_PREFIX || undefined },
          { out: process.stdout, err: process.stderr },
        );
        return ExitCodes.succeeded;
      }
      case 'status': {
        const record = await mustGet(client, needArg('job id'));
        process.stdout.write(values.json ? `${JSON.stringify(record, null, 2)}\n` : formatStatus(record));
        return isTerminal(record.state) ? exitCodeFor(record.state) : ExitCodes.succeeded;
      }
      case 'cancel': {
        const jobId = needArg('job id');
        const result = await client.cancel(jobId);
        if (result.status === 'missing') throw new NotFoundError(`job ${jobId} not found`);
        process.stdout.write(
          result.status === 'terminal'
            ? `${jobId} already ${result.state}\n`
            : `${jobId}: cancel ${result.status}\n`,
        );
        return ExitCodes.succeeded;
      }
      case 'ls': {
        // Jobs and live sandboxes side by side; a sandbox shows its own state (ready, closed …).
        const records = await client.list(listOptions);
        if (values.json) {
          // As the table: a sandbox is its own record (ready, closed …, as `sandbox ls --json`
          // prints it) with its kind, not the job record under it (state `running`).
          const listed = records.map((r) => {
            const sandbox = sandboxRecordOf(r);
            return sandbox ? { kind: r.kind, ...sandbox } : r;
          });
          process.stdout.write(`${JSON.stringify(listed, null, 2)}\n`);
          return ExitCodes.succeeded;
        }
        process.stdout.write(
          `${'ID'.padEnd(40)} ${'KIND'.padEnd(8)} ${'TENANT'.padEnd(12)} ${'STATE'.padEnd(20)} CREATED\n`,
        );
        for (const r of records) {
          const sandbox = sandboxRecordOf(r);
          const state = sandbox ? `${sandbox.state}${sandbox.reason ? ` (${sandbox.reason})` : ''}` : r.state;
          process.stdout.write(
            `${r.id.padEnd(40)} ${(sandbox ? 'sandbox' : 'job').padEnd(8)} ${r.tenant.padEnd(12)} ${state.padEnd(20)} ${new Date(r.createdAt).toISOString()}\n`,
          );
        }
        return ExitCodes.succeeded;
      }
      case 'sandbox create':
        return await createSandbox(client, arg, values);
      case 'sandbox ls':
        return await listSandboxes(client, values);
      case 'sandbox inspect':
        return await inspectSandbox(client, needArg('sandbox id'), values);
      case 'sandbox rm':
        return await removeSandbox(client, needArg('sandbox id'));
      case 'sandbox pause':
        return await pauseSandbox(client, needArg('sandbox id'));
      case 'sandbox resume':
        return await resumeSandbox(client, needArg('sandbox id'), values);
      case 'sandbox restore':
        return await restoreSandbox(client, needArg('sandbox id'), args[1]);
      case 'sandbox fork':
        return await forkSandbox(client, needArg('sandbox id'), values);
      case 'snapshot create':
        return await createSnapshot(client, needArg('sandbox id'), values);
      case 'snapshot ls':
        return await listSnapshots(client, values);
      case 'snapshot rm':
        return await removeSnapshot(client, needArg('snapshot id'));
      case 'sandbox url':
        return await printPortUrl(client, needArg('sandbox id'), args[1], values);
      case 'sandbox set-timeout':
        return await setSandboxTimeout(client, needArg('sandbox id'), args[1]);
      case 'sandbox network':
        return await updateSandboxNetwork(client, needArg('sandbox id'), values);
      case 'sandbox stats':
        return await statsCommand(client, needArg('sandbox id'), values);
      case 'sandbox history':
        return await historyCommand(client, needArg('sandbox id'), values);
      case 'sandbox keepalive':
        return await keepAliveCommand(client, needArg('sandbox id'));
      case 'ps':
        return await processesCommand(client, needArg('sandbox id'), values);
      case 'exec':
        return await execInSandbox(client, needArg('sandbox id'), commandLine, values, {
          pushFirst: cli !== undefined,
        });
      case 'shell':
        return await shellInSandbox(client, needArg('sandbox id'), values);
      case 'run-code':
        return await runCodeInSandbox(client, needArg('sandbox id'), commandLine, values);
      case 'cp':
        return await copyFiles(client, args[0] as string, args[1] as string);
      case 'volume create':
      case 'volume ls':
      case 'volume rm':
        return await volumeCommand(client, command, arg, values);
      case 'mcp': {
        // The MCP SDK and the tools load only for this command (a bundle of their own in the
        // CLI's build): every other command's start-up stays as it was.
        const { serveStdio } = await import('../mcp/index.js');
        await serveStdio(client, { defaults: { image: values.image, template: values.template } });
        return ExitCodes.succeeded;
      }
      case 'template build':
        return await templateBuild(client.redis, client.keys, templateBuildInputs(args, values));
      case 'template ls':
        return await templateList(client, values);
      case 'template rm':
        return await templateRemove(client, needArg('template name'));
      case 'apikey create':
      case 'apikey ls':
      case 'apikey revoke':
        return await apiKeyCommand(
          command,
          arg,
          values,
          new ApiKeyStore({ redis: client.redis, keys: client.keys }),
        );
      default:
        // parseCommandLine refuses unknown commands; this keeps the switch total for the compiler.
        throw new UsageError(`unknown command "${command satisfies never}"`);
    }
  } finally {
    await client.close();
    cli?.redis.disconnect();
    // Flushes the submit span before the process exits (bounded: a dead collector costs ≤ 5 s).
    await telemetry?.shutdown();
  }
}

function parseListFlags(values: ParsedCommandLine['values']): ListOptions {
  const state = values.state === undefined ? undefined : JobStateSchema.safeParse(values.state);
  if (state && !state.success) {
    throw new UsageError(`--state must be one of ${JobStateSchema.options.join(', ')}`);
  }
  const limit = values.limit === undefined ? 50 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit is 1..1000');
  return {
    tenant: values.tenant ?? (state ? undefined : 'default'),
    ...(state ? { state: state.data } : {}),
    limit,
  };
}

async function mustGet(client: SandstreamClient, jobId: string): Promise<JobRecord> {
  const record = await client.get(jobId);
  if (!record) throw new NotFoundError(`job ${jobId} not found`);
  return record;
}

function specOf(record: JobRecord): JobSpec | null {
  const parsed = JobSpecSchema.safeParse(record.spec);
  return parsed.success ? parsed.data : null;
}

async function followJob(
  client: SandstreamClient,
  jobId: string,
  options: { untilNow?: boolean } = {},
): Promise<number> {
  const record = await mustGet(client, jobId);
  const renderer = new TimelineRenderer({ out: process.stdout, err: process.stderr }, specOf(record));
  // Ctrl-C stops following, not the job.
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  try {
    for await (const item of client.follow(jobId, {
      signal: controller.signal,
      outageLimitMs: FOLLOW_OUTAGE_LIMIT_MS,
      ...options,
    })) {
      renderer.render(item);
      if (item.type === 'step-completed') {
        for (const line of describeOutput(await stepResult(client, jobId, item.stepId)))
          process.stdout.write(`${line}\n`);
      }
    }
  } finally {
    renderer.stopSpinner();
  }
  if (controller.signal.aborted) return ExitCodes.cancelled;
  const final = await mustGet(client, jobId);
  return exitCodeFor(final.state);
}

/**
 * The dispatcher records a step's result just after the agent's `completed` event, so it may
 * take a moment to appear; wait briefly rather than print nothing.
 */
async function stepResult(
  client: SandstreamClient,
  jobId: string,
  stepId: string,
): Promise<StepResult | undefined> {
  for (let i = 0; i < 20; i++) {
    const record = await client.get(jobId);
    const result = record?.stepResults[stepId];
    if (result || (record && isTerminal(record.state))) return result;
    await new Promise((r) => setTimeout(r, 50));
  }
  return undefined;
}

function formatStatus(record: JobRecord): string {
  const lines = [
    `job      ${record.id}`,
    `tenant   ${record.tenant}`,
    `state    ${record.state}${record.reason ? ` (${record.reason})` : ''}`,
    `created  ${new Date(record.createdAt).toISOString()}`,
  ];
  if (record.finishedAt) lines.push(`finished ${new Date(record.finishedAt).toISOString()}`);
  if (record.cancelRequested) lines.push(`cancel   requested: ${record.cancelRequested}`);
  const steps = Object.entries(record.stepResults).sort(([a], [b]) =>
    a.localeCompare(b, 'en', { numeric: true }),
  );
  for (const [stepId, r] of steps) {
    const how = r.errorMessage ? ` ${r.errorMessage}` : '';
    lines.push(`  ${stepId.padEnd(10)} exit ${r.exitCode ?? '-'}  ${r.durationSeconds.toFixed(2)} s${how}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Ends the process once stdout and stderr are flushed, with the exit code set. A command that
 * finished must not wait for timers it does not own: ioredis' reply parser keeps a 50 ms interval
 * running for about 2 s after a large reply (each chunk of `cp`'s download is one), which held
 * `sandstream cp <id>:<path> <dst>` open that long after its copy.
 */
function exitWhenFlushed(): void {
  let pending = 2;
  const flushed = () => {
    pending -= 1;
    if (pending === 0) process.exit();
  };
  process.stdout.write('', flushed);
  process.stderr.write('', flushed);
}

/** Runs the CLI on `argv` (the words after `sandstream`) and ends the process with its exit code. */
export function runCli(argv: string[]): void {
  main(argv)
    .then(
      (code) => {
        process.exitCode = code;
      },
      (err: unknown) => {
        // Redis (directly, or behind the API's 503) did not answer: the SDK's typed error, or
        // ioredis's own from the CLI's direct calls (apikey).
        const unavailable = infrastructureErrorOf(err);
        if (err instanceof SpecFileError || err instanceof UsageError) {
          process.stderr.write(`sandstream: ${err.message}\n`);
          process.exitCode = ExitCodes.usage;
        } else if (err instanceof SandboxClosedError) {
          // A sandbox that failed to start, or closed under a command.
          process.stderr.write(`sandstream: ${err.message}\n`);
          process.exitCode = currentCommand === 'exec' ? ExitCodes.execFailed : ExitCodes.failed;
        } else if (err instanceof SandboxSpecError || err instanceof SandstreamOptionsError) {
          process.stderr.write(`sandstream: ${err.message}\n`);
          process.exitCode = ExitCodes.usage;
        } else if (
          err instanceof NotFoundError ||
          err instanceof JobNotFoundError ||
          err instanceof SandboxNotFoundError ||
          err instanceof VolumeNotFoundError ||
          err instanceof TemplateNotFoundError ||
          err instanceof SnapshotNotFoundError ||
          err instanceof CopyPathNotFoundError ||
          err instanceof SandboxCommandNotFoundError ||
          (err instanceof SandboxFileError && err.code === 'not_found')
        ) {
          // Never there, or gone while followed (JobNotFoundError: Redis lost its data).
          process.stderr.write(`sandstream: ${err.message}\n`);
          process.exitCode = ExitCodes.notFound;
        } else if (
          err instanceof VolumeInUseError ||
          err instanceof FileTemplateError ||
          err instanceof SandboxLimitError ||
          err instanceof CopyRefusedError ||
          err instanceof SandboxFileError
        ) {
          // Refused as asked: another sandbox writes to the volume, a quota is spent, or the
          // template is the operator's file's.
          process.stderr.write(`sandstream: ${err.message}\n`);
          process.exitCode = ExitCodes.failed;
        } else if (unavailable) {
          // Redis went away mid-command: ioredis' own message names its option, not the cause.
          const cause = connection?.lastError()?.message ?? unavailable.message;
          process.stderr.write(
            connection
              ? `sandstream: lost Redis at ${redactUrl(connection.url)}: ${cause}\n`
              : `sandstream: ${unavailable.message}\n`,
          );
          process.exitCode = currentCommand === 'exec' ? ExitCodes.execFailed : ExitCodes.infrastructure;
        } else if (err instanceof Error && err.name === 'JobSpecError') {
          process.stderr.write(`sandstream: ${err.message}\n`);
          process.exitCode = ExitCodes.usage;
        } else if (err instanceof Error && /ERR_PARSE_ARGS/.test((err as { code?: string }).code ?? '')) {
          process.stderr.write(`sandstream: ${err.message}\n${USAGE}\n`);
          process.exitCode = ExitCodes.usage;
        } else {
          process.stderr.write(`sandstream: ${(err as Error).message ?? String(err)}\n`);
          process.exitCode = currentCommand === 'exec' ? ExitCodes.execFailed : ExitCodes.infrastructure;
        }
      },
    )
    .then(exitWhenFlushed);
}

// `node dist/cli/main.js …` and the bin run it; the start-up snapshot's builder only loads it
// (snapshot-main.ts runs it in each process).
if (!startupSnapshot.isBuildingSnapshot()) runCli(process.argv.slice(2));
