import type { FastifyRequest } from 'fastify';

/**
 * Adds a check started in onRequest (a rate limit, an ownership read) to the request's gate:
 * the checks go to Redis side by side while the body is read and validated, and the handler
 * waits for all of them (authentication.ts awaits the gate in preHandler). The first to fail
 * in time is the request's answer.
 */
export function addToGate(request: FastifyRequest, check: Promise<unknown>): void {
  const gate = request.gate ? Promise.all([request.gate, check]) : check;
  request.gate = gate.then(() => undefined);
  // Awaited in preHandler; a request that fails earlier must not leave it unhandled.
  request.gate.catch(() => {});
}
