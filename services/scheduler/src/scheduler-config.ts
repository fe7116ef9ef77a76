import { intVar, SharedEnv, serviceEnvSchema } from '@sandstream/service-kit';
import { z } from 'zod';

export const SchedulerEnvSchema = serviceEnvSchema(8081).extend({
  /** Sandboxes running at once, all tenants together. */
  SCHEDULER_GLOBAL_SLOTS: intVar(1, 100_000, 50),
  /** Sandboxes one tenant may run at once. */
  SCHEDULER_TENANT_SLOTS: intVar(1, 100_000, 10),
  /** Per-tenant exceptions to SCHEDULER_TENANT_SLOTS, e.g. `acme=50,trial=1`. */
  SCHEDULER_TENANT_SLOT_OVERRIDES: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const out: Record<string, number> = {};
      for (const entry of (raw ?? '')
        .split(',')
        .map((e) => e.trim())
        .filter(Boolean)) {
        const match = /^([a-z0-9]([a-z0-9-]*[a-z0-9])?)=(\d{1,6})$/.exec(entry);
        if (!match || Number(match[3]) < 1) {
          ctx.addIssue({ code: 'custom', message: `"${entry}" is not tenant=slots (slots at least 1)` });
          continue;
        }
        out[match[1] as string] = Number(match[3]);
      }
      return out;
    }),
  LEASE_SECONDS: SharedEnv.LEASE_SECONDS,
  /** Jobs one replica admits concurrently. */
  SCHEDULER_CONCURRENCY: intVar(1, 1000, 10),
  /** A job waiting for capacity is re-checked at least this often even if no wake-up arrives. */
  SCHEDULER_RECHECK_SECONDS: intVar(1, 3600, 30),
  /** YAML/JSON file of named sandbox templates (libs/sandbox TemplateRegistry); watched for changes. */
  SANDSTREAM_TEMPLATES_FILE: z.string().optional(),
});
export type SchedulerEnv = z.output<typeof SchedulerEnvSchema>;

/** The slot limit of one tenant: its override, else the common limit. */
export function tenantSlotLimit(
  env: Pick<SchedulerEnv, 'SCHEDULER_TENANT_SLOTS' | 'SCHEDULER_TENANT_SLOT_OVERRIDES'>,
) {
  return (tenant: string): number =>
    env.SCHEDULER_TENANT_SLOT_OVERRIDES[tenant] ?? env.SCHEDULER_TENANT_SLOTS;
}
