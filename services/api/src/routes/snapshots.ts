import { SnapshotIdSchema, SnapshotRecordSchema } from '@sandstream/bus';
import type { Snapshots } from '@sandstream/client';
import { strictObject } from '@sandstream/wire';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { problemResponses } from '../plugins/problem-replies.js';
import type { Principal } from '../principal.js';
import { notFound } from '../problem.js';

/** A snapshot as every route answers it (the SDK's SnapshotInfo). */
export const SnapshotResponse = SnapshotRecordSchema.omit({ state: true }).meta({ id: 'Snapshot' });

export const SnapshotIdParams = strictObject({ snapshotId: SnapshotIdSchema });

/** The caller's snapshots: its tenant's, or every tenant's for an admin key. */
export function snapshotsOf(ctx: ApiContext, principal: Principal): Snapshots {
  return principal.admin ? ctx.client.snapshots : ctx.client.snapshots.forTenant(principal.tenant);
}

/** `/v1/snapshots`: list, get, delete (take one with POST /v1/sandboxes/{id}/snapshots). */
export function snapshotRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const tags = ['snapshots'];
    const problems = problemResponses(404);

    app.get(
      '',
      {
        schema: {
          tags,
          summary: "The caller's snapshots, newest first",
          response: { 200: z.array(SnapshotResponse) },
        },
      },
      async (request) => snapshotsOf(ctx, principalOf(request)).list(),
    );

    app.get(
      '/:snapshotId',
      {
        schema: {
          tags,
          summary: "A snapshot (another tenant's is not found)",
          params: SnapshotIdParams,
          response: { 200: SnapshotResponse, ...problems },
        },
      },
      async (request) => {
        const found = await snapshotsOf(ctx, principalOf(request)).get(request.params.snapshotId);
        if (!found) throw notFound(`snapshot ${request.params.snapshotId}`);
        return found;
      },
    );

    app.delete(
      '/:snapshotId',
      {
        schema: {
          tags,
          summary: "Delete a snapshot (its stored bytes go with the reaper's next pass)",
          params: SnapshotIdParams,
          response: { 204: z.null(), ...problems },
        },
      },
      async (request, reply) => {
        await snapshotsOf(ctx, principalOf(request)).delete(request.params.snapshotId);
        return reply.code(204).send(null);
      },
    );
  };
}
