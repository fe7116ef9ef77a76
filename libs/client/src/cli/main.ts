#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { isTerminal, type JobRecord, type JobSpec, JobSpecSchema, JobStateSchema } from '@sandstream/bus';
import type { StepResult } from '@sandstream/wire';
import { SandstreamClient } from '../client.js';
import { decodeFollowEntry } from '../follow-entry.js';
import { JobNotFoundError } from '../job-not-found.js';
import { ExitCodes, exitCodeFor } from './exit-codes.js';
import { loadSpecFile, SpecFileError } from './load-spec-file.js';
import { describeOutput, TimelineRenderer } from './render.js';
import { startCliTelemetry } from './telemetry.js';

/** Exit code of a job that is not found (main defines it in ExitCodes; reconciled at merge). */
const NOT_FOUND_EXIT_CODE = 4;

const USAGE = `Usage: sandstream <command> [options]

Commands:
  submit <job.yaml> [--follow]   validate and submit a job; --follow streams its output and
                                 exits with the job's outcome
  logs [-f] <jobId>              print a job's output (-f: keep following until it ends)
  status <jobId> [--json]        show a job's state and step results
  cancel <jobId>                 cancel a job (a running step is killed)
  ls [--tenant t] [--state s]    list jobs (newest first)

Options:
  --redis-url <url>   default $REDIS_URL or redis://127.0.0.1:6379
  --namespace <ns>    default $SANDSTREAM_NAMESPACE or sandstream
  -h, --help

Exit codes: 0 succeeded, 1 failed, 2 usage or invalid job file, 3 Redis or other
infrastructure error, 124 timed out, 130 cancelled.`;

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      follow: { type: 'boolean', short: 'f' },
      json: { type: 'boolean' },
      tenant: { type: 'string' },
      state: { type: 'string' },
      limit: { type: 'string' },
      'redis-url': { type: 'string' },
      namespace: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, arg] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command || values.help ? ExitCodes.succeeded : ExitCodes.usage;
  }
  const needArg = (what: string) => {
    if (!arg) throw new UsageError(`${command} needs a ${what}`);
    return arg;
  };
  // Validate the file before connecting anywhere: a bad spec costs no round trip.
  const specFile = command === 'submit' ? await loadSpecFile(needArg('job file')) : null;
  // Only submit starts a trace. Off unless the services' switch (SANDSTREAM_TELEMETRY / an OTLP
  // endpoint) is set; the SDK is loaded only then, so the CLI pays nothing by default.
  const telemetry = command === 'submit' ? await startCliTelemetry() : undefined;

  const client = new SandstreamClient({
    redisUrl: values['redis-url'] ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    prefix: values.namespace ?? process.env.SANDSTREAM_NAMESPACE ?? 'sandstream',
  });
  try {
    switch (command) {
      case 'submit': {
        const { jobId, created } = await client.submit(specFile);
        process.stderr.write(`${created ? 'submitted' : 'already submitted'} ${jobId}\n`);
        process.stdout.write(`${jobId}\n`);
        if (!values.follow) return ExitCodes.succeeded;
        return await followJob(client, jobId);
      }
      case 'logs': {
        const jobId = needArg('job id');
        if (values.follow) return await followJob(client, jobId);
        return await printLogs(client, jobId);
      }
      case 'status': {
        const record = await mustGet(client, needArg('job id'));
        process.stdout.write(values.json ? `${JSON.stringify(record, null, 2)}\n` : formatStatus(record));
        return isTerminal(record.state) ? exitCodeFor(record.state) : ExitCodes.succeeded;
      }
      case 'cancel': {
        const jobId = needArg('job id');
        const result = await client.cancel(jobId);
        if (result.status === 'missing') throw new UsageError(`no job ${jobId}`);
        process.stdout.write(
          result.status === 'terminal'
            ? `${jobId} already ${result.state}\n`
            : `${jobId}: cancel ${result.status}\n`,
        );
        return ExitCodes.succeeded;
      }
      case 'ls': {
        const state = values.state === undefined ? undefined : JobStateSchema.safeParse(values.state);
        if (state && !state.success) {
          throw new UsageError(`--state must be one of ${JobStateSchema.options.join(', ')}`);
        }
        const limit = values.limit === undefined ? 50 : Number(values.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit is 1..1000');
        const records = await client.list({
          tenant: values.tenant ?? (state ? undefined : 'default'),
          ...(state ? { state: state.data } : {}),
          limit,
        });
        for (const r of records) {
          process.stdout.write(
            `${r.id.padEnd(40)} ${r.tenant.padEnd(12)} ${r.state.padEnd(10)} ${new Date(r.createdAt).toISOString()}\n`,
          );
        }
        return ExitCodes.succeeded;
      }
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } finally {
    await client.close();
    // Flushes the submit span before the process exits (bounded: a dead collector costs ≤ 5 s).
    await telemetry?.shutdown();
  }
}

async function mustGet(client: SandstreamClient, jobId: string): Promise<JobRecord> {
  const record = await client.get(jobId);
  if (!record) throw new UsageError(`no job ${jobId}`);
  return record;
}

function specOf(record: JobRecord): JobSpec | null {
  const parsed = JobSpecSchema.safeParse(record.spec);
  return parsed.success ? parsed.data : null;
}

async function followJob(client: SandstreamClient, jobId: string): Promise<number> {
  const record = await mustGet(client, jobId);
  const renderer = new TimelineRenderer({ out: process.stdout, err: process.stderr }, specOf(record));
  // Ctrl-C stops following, not the job.
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  try {
    for await (const item of client.follow(jobId, { signal: controller.signal })) {
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

async function printLogs(client: SandstreamClient, jobId: string): Promise<number> {
  const record = await mustGet(client, jobId);
  const renderer = new TimelineRenderer({ out: process.stdout, err: process.stderr }, specOf(record));
  const stream = client.keys.sandbox(jobId).events;
  let cursor = '-';
  for (;;) {
    const entries = (await client.redis.xrange(stream, cursor, '+', 'COUNT', 1000)) as [string, string[]][];
    const fresh = cursor === '-' ? entries : entries.slice(1);
    for (const [id, fields] of fresh) {
      const item = decodeFollowEntry(id, fields);
      if (item && item.type !== 'state') renderer.render(item);
      if (item?.type === 'step-completed') {
        for (const line of describeOutput(record.stepResults[item.stepId])) process.stdout.write(`${line}\n`);
      }
    }
    if (fresh.length === 0) break;
    cursor = entries[entries.length - 1]?.[0] ?? cursor;
  }
  process.stderr.write(`● ${record.state}${record.reason ? ` (${record.reason})` : ''}\n`);
  return ExitCodes.succeeded;
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof JobNotFoundError) {
      // The job's record is gone (Redis lost its data, or it never existed): "not found", 4.
      process.stderr.write(`sandstream: ${err.message}\n`);
      process.exitCode = NOT_FOUND_EXIT_CODE;
    } else if (err instanceof SpecFileError || err instanceof UsageError) {
      process.stderr.write(`sandstream: ${err.message}\n`);
      process.exitCode = ExitCodes.usage;
    } else if (err instanceof Error && err.name === 'JobSpecError') {
      process.stderr.write(`sandstream: ${err.message}\n`);
      process.exitCode = ExitCodes.usage;
    } else if (err instanceof Error && /ERR_PARSE_ARGS/.test((err as { code?: string }).code ?? '')) {
      process.stderr.write(`sandstream: ${err.message}\n${USAGE}\n`);
      process.exitCode = ExitCodes.usage;
    } else {
      process.stderr.write(`sandstream: ${(err as Error).message ?? String(err)}\n`);
      process.exitCode = ExitCodes.infrastructure;
    }
  },
);
