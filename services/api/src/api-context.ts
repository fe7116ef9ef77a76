import type { KeySpace, RedisClient } from '@sandstream/bus';
import type { SandstreamClient } from '@sandstream/client';
import type { TemplateRegistry } from '@sandstream/sandbox';
import type { Principals } from './principal.js';
import type { WorkQueues } from './work-queues.js';

/** What every route of the API works with: the SDK (the only way it reaches the services). */
export interface ApiContext {
  client: SandstreamClient;
  redis: RedisClient;
  /** The work queues, for their figures and the dashboard. */
  queues: WorkQueues;
  keys: KeySpace;
  principals: Principals;
  /** The operator's templates file, when there is one (GET /v1/templates). */
  templates: TemplateRegistry | undefined;
  /** What a sandbox created with neither image nor template gets. */
  defaults: { template: string | undefined; image: string };
}
