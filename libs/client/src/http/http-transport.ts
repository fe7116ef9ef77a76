import type { CancelResult, JobRecord, JobSpec, SubmitResult } from '@sandstream/bus';
import { sleep } from '@sandstream/bus';
import type { FollowOptions, ListOptions } from '../client-options.js';
import { followBackoffMs } from '../follow-backoff.js';
import type { FollowItem } from '../follow-entry.js';
import type { JobTransport, SandstreamTransport } from '../transport.js';
import { HttpApi, isPassingOutage } from './http-api.js';
import { HttpSandboxTransport } from './http-sandbox-transport.js';
import { HttpTemplateTransport } from './http-template-transport.js';
import { HttpVolumeTransport } from './http-volume-transport.js';
import { errorOfProblem, ProblemBodySchema } from './problem-errors.js';

export interface HttpTransportOptions {
  url: string;
  apiKey?: string | undefined;
}

/**
 * The SDK over the HTTP API (services/api), for clients outside the cluster: no Redis access
 * needed, only the API's URL and a key. Every call is one request; a job's timeline is the
 * API's server-sent events, resumed with Last-Event-ID after a dropped connection.
 */
export class HttpTransport implements SandstreamTransport, JobTransport {
  readonly jobs: JobTransport = this;
  readonly sandboxes: HttpSandboxTransport;
  readonly volumes: HttpVolumeTransport;
  readonly templates: HttpTemplateTransport;
  private readonly api: HttpApi;

  constructor(options: HttpTransportOptions) {
    this.api = new HttpApi(options.url, options.apiKey);
    this.sandboxes = new HttpSandboxTransport(this.api);
    this.volumes = new HttpVolumeTransport(this.api);
    this.templates = new HttpTemplateTransport(this.api);
  }

  submit(spec: JobSpec, tenantGiven: boolean): Promise<SubmitResult> {
    // An unnamed tenant is the key's (the API's rule), not the parsed spec's default.
    const { tenant, ...rest } = spec;
    return this.api.json<SubmitResult>('/v1/jobs', {
      method: 'POST',
      body: tenantGiven ? spec : rest,
      subject: { spec: 'job', ...(spec.id !== undefined ? { jobId: spec.id } : {}) },
    });
  }

  async get(jobId: string): Promise<JobRecord | null> {
    return this.api.jsonOrNull<JobRecord>(`/v1/jobs/${encodeURIComponent(jobId)}`, { subject: { jobId } });
  }

  list(options: ListOptions): Promise<JobRecord[]> {
    return this.api.json<JobRecord[]>('/v1/jobs', {
      query: { tenant: options.tenant, state: options.state, limit: options.limit },
    });
  }

  async cancel(jobId: string, _reason: string): Promise<CancelResult> {
    const path = `/v1/jobs/${encodeURIComponent(jobId)}`;
    const response = await this.api.request(path, { method: 'DELETE', allow: [404], subject: { jobId } });
    if (response.status === 404) {
      await response.body?.cancel();
      return { status: 'missing' };
    }
    return (await response.json()) as CancelResult;
  }

  /**
   * The job's timeline from GET /v1/jobs/{id}/events. A connection that drops (the API
   * restarting, a proxy timing out) is reopened with Last-Event-ID, so no item is missed or
   * seen twice; the API being unreachable (or answering 503: its Redis away) is waited out with
   * backoff up to 2 s apart, or for `outageLimitMs` at most.
   */
  /** follow() one item at a time: the events arrive one by one over the stream. */
  async *followPages(jobId: string, options: FollowOptions): AsyncGenerator<FollowItem[], void, undefined> {
    for await (const item of this.follow(jobId, options)) yield [item];
  }

  async *follow(jobId: string, options: FollowOptions): AsyncGenerator<FollowItem, void, undefined> {
    const path = `/v1/jobs/${encodeURIComponent(jobId)}/events`;
    let cursor = options.from;
    // Resuming after a dropped connection, as an EventSource does: Last-Event-ID, the last id seen.
    let lastEventId: string | undefined;
    let failures = 0;
    let outageSince: number | undefined;
    const controller = new AbortController();
    const abort = () => controller.abort();
    options.signal?.addEventListener('abort', abort, { once: true });
    try {
      while (!controller.signal.aborted) {
        try {
          const events = this.api.events(path, {
            query: {
              ...(lastEventId === undefined && cursor !== undefined ? { from: cursor } : {}),
              ...(options.untilNow ? { follow: 'false' } : {}),
            },
            ...(lastEventId !== undefined ? { headers: { 'last-event-id': lastEventId } } : {}),
            signal: controller.signal,
            subject: { jobId, seen: cursor !== undefined },
          });
          for await (const event of events) {
            failures = 0;
            outageSince = undefined;
            // follow=false (untilNow): the stream ended where it was asked to.
            if (event.event === 'end') return;
            const data = JSON.parse(event.data) as unknown;
            if (event.event === 'error') {
              const problem = ProblemBodySchema.safeParse(data);
              throw problem.success
                ? errorOfProblem(problem.data, { jobId, seen: cursor !== undefined })
                : new Error(event.data);
            }
            const item = data as FollowItem;
            if (event.id !== undefined) cursor = lastEventId = event.id;
            if (options.statesOnly && item.type !== 'state') continue;
            yield item;
            if (item.type === 'state' && item.terminal) return;
          }
          // The stream ended without the terminal state: the connection was cut; reopen it.
        } catch (err) {
          if (controller.signal.aborted) return;
          if (!isPassingOutage(err)) throw err;
          outageSince ??= Date.now();
          if (options.outageLimitMs !== undefined && Date.now() - outageSince >= options.outageLimitMs)
            throw err;
        }
        failures++;
        await sleep(followBackoffMs(failures), controller.signal);
      }
    } finally {
      options.signal?.removeEventListener('abort', abort);
      controller.abort();
    }
  }

  async close(): Promise<void> {
    this.sandboxes.closeTerminals();
    this.api.close();
  }
}
