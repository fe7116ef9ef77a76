import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyPluginAsync } from 'fastify';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { HttpProblem, sendProblem } from '../problem.js';

export const ADMIN_QUEUES_PATH = '/admin/queues';

/** The queue dashboard (bull-board), for admin keys only; kept out of the OpenAPI document. */
export function adminQueueRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    const board = new FastifyAdapter();
    board.setBasePath(ADMIN_QUEUES_PATH);
    createBullBoard({ queues: ctx.queues.queues.map((q) => new BullMQAdapter(q)), serverAdapter: board });
    app.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, hide: true };
    });
    // Answered here, not thrown: bull-board's plugin has an error handler of its own.
    app.addHook('preHandler', async (request, reply) => {
      if (!principalOf(request).admin) {
        return sendProblem(
          request,
          reply,
          new HttpProblem(403, 'forbidden', 'the queue dashboard is for admin keys'),
        );
      }
    });
    await app.register(board.registerPlugin(), { prefix: ADMIN_QUEUES_PATH });
  };
}
