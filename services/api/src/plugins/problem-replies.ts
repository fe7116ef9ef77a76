import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { HttpProblem, ProblemSchema, sendProblem } from '../problem.js';

/** The statuses a route may answer with a problem, each the shared Problem schema. */
type ProblemStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 426 | 429 | 502 | 503 | 504;

/**
 * The problem answers a route declares for the OpenAPI document, all of the one Problem schema
 * (`#/components/schemas/Problem`): `...problemResponses(404, 409)`. Those any route may give
 * (SHARED_PROBLEMS) are added to every route by problemReplies; name only the route's own.
 */
export function problemResponses(
  ...statuses: ProblemStatus[]
): Partial<Record<ProblemStatus, typeof ProblemSchema>> {
  return Object.fromEntries(statuses.map((status) => [status, ProblemSchema]));
}

/**
 * What any route that declares its answers may answer: an invalid request (400), no or a bad
 * key (401), a key's cap of open requests or rate limit (429), a Redis that does not answer (503).
 */
const SHARED_PROBLEMS = problemResponses(400, 401, 429, 503);

/**
 * Errors as problem details (problem.ts) wherever they arise: a route's, a hook's, Fastify's own
 * before routing (buildApi passes sendProblem as Fastify's frameworkErrors too), a route that does not
 * exist; and the shared problem answers declared once on every route for the OpenAPI document.
 * Registered with fastify-plugin: the handlers and the onRoute hook are the app's own, so they
 * apply to routes registered in every child scope after it.
 */
const problemRepliesPlugin: FastifyPluginAsync = async (app) => {
  app.setErrorHandler((err, request, reply) => sendProblem(request, reply, err));
  app.setNotFoundHandler((request, reply) =>
    sendProblem(
      request,
      reply,
      new HttpProblem(404, 'not-found', `no route ${request.method} ${request.url.split('?')[0]}`),
    ),
  );
  app.addHook('onRoute', (route) => {
    const response = route.schema?.response;
    if (response && typeof response === 'object')
      route.schema = { ...route.schema, response: { ...SHARED_PROBLEMS, ...response } };
  });
};

export const problemReplies = fp(problemRepliesPlugin, {
  name: 'sandstream-problem-replies',
  fastify: '5.x',
});
