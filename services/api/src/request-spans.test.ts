import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { traceRequests } from './request-spans.js';
import type { TraceLinks } from './trace-links.js';

describe('request spans with telemetry off', () => {
  it('adds no per-request work: a request has no span, not even a no-op one', async () => {
    const app = Fastify();
    let asked = 0;
    const links = {
      linkTo: async () => {
        asked++;
        return undefined;
      },
    } as unknown as TraceLinks;
    traceRequests(app, links);
    app.get('/x/:id', async (request) => ({ span: request.span === undefined }));
    const res = await app.inject({ method: 'GET', url: '/x/job-1' });
    expect(res.json()).toEqual({ span: true });
    expect(asked).toBe(0);
    await app.close();
  });
});
