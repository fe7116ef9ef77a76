import { RedisEnvSchema } from '@sandstream/bus';
import { intVar, portVar } from '@sandstream/service-kit';
import { z } from 'zod';

export const SchedulerEnvSchema = RedisEnvSchema.extend({
  /** Isolates queues and shared keys (tests, several installations on one Redis). */
  SANDSTREAM_NAMESPACE: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-"')
    .default('sandstream'),
  /** Sandboxes running at once, all tenants together. */
  SCHEDULER_GLOBAL_SLOTS: intVar(1, 100_000, 50),
  /** Sandboxes one tenant may run at once. */
  SCHEDULER_TENANT_SLOTS: intVar(1, 100_000, 10),
  /** A slot lease lapses this long after its last renewal (pod-lifecycle renews live jobs). */
  LEASE_SECONDS: intVar(5, 3600, 60),
  /** Jobs one replica admits concurrently. */
  SCHEDULER_CONCURRENCY: intVar(1, 1000, 10),
  /** A job waiting for capacity is re-checked at least this often even if no wake-up arrives. */
  SCHEDULER_RECHECK_SECONDS: intVar(1, 3600, 30),
  /** YAML/JSON file of named sandbox templates (libs/sandbox TemplateRegistry); watched for changes. */
  SANDSTREAM_TEMPLATES_FILE: z.string().optional(),
  HEALTH_PORT: portVar(8081),
});
export type SchedulerEnv = z.output<typeof SchedulerEnvSchema>;
