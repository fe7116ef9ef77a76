import { context, propagation, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { tracingEnabled } from '@sandstream/telemetry';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TraceLinks } from './trace-links.js';

declare module 'fastify' {
  interface FastifyRequest {
    span: Span | undefined;
  }
}

const tracer = trace.getTracer('sandstream-api');

/**
 * One SERVER span per request (`POST /v1/jobs`, by route), continuing the caller's trace when
 * it sends `traceparent`, and the handler runs inside it: the SDK's submit span is its child and
 * its context travels in the job or sandbox spec, so every service's spans for a job created
 * through the API join the request's trace. Requests on an existing job or sandbox carry its id
 * (`sandstream.job.id`) and a link to its trace (trace-links.ts). With telemetry off (decided
 * before the API is built: runService starts it first) no hook is added at all: every span would
 * be a no-op, and each hook is one more step in every request's way through Fastify (the exec
 * round trip over HTTP, docs/benchmarks.md).
 */
export function traceRequests(app: FastifyInstance, links: TraceLinks): void {
  app.decorateRequest('span', undefined);
  if (!tracingEnabled()) return;
  app.addHook('onRequest', async (request) => {
    const parent = propagation.extract(context.active(), request.headers);
    const route = request.routeOptions.url ?? 'unknown route';
    request.span = tracer.startSpan(
      `${request.method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': request.method, 'http.route': route },
      },
      parent,
    );
    const id = (request.params as { id?: unknown } | undefined)?.id;
    if (typeof id !== 'string') return;
    request.span.setAttribute('sandstream.job.id', id);
    if (!request.span.isRecording()) return;
    const link = await links.linkTo(id);
    if (link) request.span.addLink(link);
  });
  app.addHook('onResponse', async (request, reply) => {
    endSpan(request, reply.statusCode);
  });
  // A hijacked reply (SSE, WebSocket) has no onResponse: its span ends when the socket closes.
  app.addHook('onRequestAbort', async (request) => endSpan(request, 499));
  app.addHook('onRoute', (route) => {
    const handler = route.handler;
    route.handler = function (this: unknown, request: FastifyRequest, ...rest: unknown[]) {
      const span = request.span;
      if (!span) return (handler as (...args: unknown[]) => unknown).call(this, request, ...rest);
      request.raw.once('close', () => endSpan(request, request.raw.destroyed ? 499 : 200));
      return context.with(trace.setSpan(context.active(), span), () =>
        (handler as (...args: unknown[]) => unknown).call(this, request, ...rest),
      );
    } as typeof route.handler;
  });
}

function endSpan(request: FastifyRequest, status: number): void {
  const span = request.span;
  if (!span) return;
  request.span = undefined;
  span.setAttribute('http.response.status_code', status);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  if (request.principal) span.setAttribute('sandstream.tenant', request.principal.tenant);
  span.end();
}
