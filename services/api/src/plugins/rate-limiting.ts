import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import type { ApiContext } from '../api-context.js';
import { OpenRequests } from '../open-requests.js';
import { HttpProblem } from '../problem.js';
import { RateLimiter } from '../rate-limiter.js';
import { addToGate } from './request-gate.js';

export interface RateLimitingOptions {
  ctx: ApiContext;
  /** Requests per minute per key (per address without one), shared through Redis. */
  perMinute: number;
  /** Requests open at once per key (per address without one) on this replica. */
  maxOpenPerKey: number;
}

/**
 * Bounds what one key (one address without a key) may ask of the API: requests open at once on
 * this replica (429 `too-many-open-requests`, at once) and requests per minute across replicas
 * (429 `rate-limited`, counted in Redis beside the other gates). Runs after authentication
 * (the bucket is the principal's key); registered with fastify-plugin so it applies to every
 * route of the app.
 */
const rateLimitingPlugin: FastifyPluginAsync<RateLimitingOptions> = async (app, options) => {
  const limiter = new RateLimiter(options.ctx, options.perMinute);
  const openRequests = new OpenRequests(options.maxOpenPerKey);
  app.addHook('onRequest', async (request, reply) => {
    const principal = request.principal;
    if (!principal) return; // a public path
    const bucket = principal.keyId === 'anonymous' ? `ip:${request.ip}` : `key:${principal.keyId}`;
    // A WebSocket's response too closes only with its socket: it counts while the shell is open.
    if (!openRequests.admit(bucket, reply.raw)) {
      reply.header('connection', 'close');
      throw new HttpProblem(
        429,
        'too-many-open-requests',
        `at most ${options.maxOpenPerKey} requests open at once per key: wait for some to end`,
      );
    }
    addToGate(request, limiter.take(bucket));
  });
};

export const rateLimiting = fp(rateLimitingPlugin, {
  name: 'sandstream-rate-limiting',
  fastify: '5.x',
  dependencies: ['sandstream-authentication'],
});
