import { strictObject } from '@sandstream/wire';
import { z } from 'zod';
import { SandboxSpecSchema } from '../sandbox-spec.js';

/**
 * A SandboxSpec field as people write it in a templates file: every object inside it (resources
 * and its requests/limits, a secretEnv reference, a toleration, persistentWorkspace) is strict
 * too, so `resources: { limit: … }` is refused by name instead of silently ignored. The copies
 * are clones (checks kept); SandboxSpecSchema itself stays lenient, as pod-lifecycle reads it from
 * queue payloads. podTemplate is a record of unknown by design (a partial Pod) and stays free.
 */
function strictWithin(schema: z.core.$ZodType): z.core.$ZodType {
  if (schema instanceof z.ZodObject) {
    const shape = Object.fromEntries(
      Object.entries(schema.shape).map(([key, field]) => [key, strictWithin(field)]),
    );
    return strictObject(shape);
  }
  if (schema instanceof z.ZodOptional) return z.optional(strictWithin(schema.unwrap()));
  if (schema instanceof z.ZodArray)
    return schema.clone({ ...schema.def, element: strictWithin(schema.element) });
  if (schema instanceof z.ZodRecord) {
    return schema.clone({ ...schema.def, valueType: strictWithin(schema.def.valueType) });
  }
  return schema;
}

/**
 * The spec's own fields, every one optional and without its default: a template or a request
 * only says what it changes, and defaults are applied once, after merging. Unknown keys are
 * refused, at every depth, so that a typo ("imgae") is an error naming the nearest valid key.
 */
function overrideShape() {
  const shape: Record<string, z.ZodType> = {};
  for (const [key, field] of Object.entries(SandboxSpecSchema.shape)) {
    const inner = field instanceof z.ZodDefault ? field.unwrap() : field;
    shape[key] = z.optional(strictWithin(inner instanceof z.ZodOptional ? inner.unwrap() : inner));
  }
  return shape as { [K in keyof typeof SandboxSpecSchema.shape]: z.ZodOptional<z.ZodType> };
}

export const SpecOverridesSchema = strictObject(overrideShape()).omit({ template: true });
export type SpecOverrides = Partial<z.input<typeof SandboxSpecSchema>>;

/** Secret names a request may put in its own secretEnv (operator allow-list); not part of the spec. */
const allowedSecrets = z.array(z.string().min(1).max(253)).max(1000);

/** Most members one pool may hold; the global capacity (pod-lifecycle) bounds all pools together. */
export const POOL_MAX_LIMIT = 1000;

/**
 * A warm pool of the template: `min` members are kept booted and waiting for a claim; `max`
 * bounds the pool's unclaimed members at every moment, starting ones and those of an older
 * version being replaced included.
 */
export const PoolSchema = strictObject({
  min: z.number().int('pool.min must be a whole number').min(0, 'pool.min must be at least 0'),
  max: z
    .number()
    .int('pool.max must be a whole number')
    .min(1, 'pool.max must be at least 1')
    .max(POOL_MAX_LIMIT, `pool.max must be at most ${POOL_MAX_LIMIT}`),
}).refine((p) => p.min <= p.max, { message: 'pool.min must not exceed pool.max', path: ['min'] });
export type PoolConfig = z.output<typeof PoolSchema>;

const tenantName = z.string().min(1).max(253);

export const TemplateSchema = SpecOverridesSchema.extend({
  /** Free text for operators and `sandstream templates`; not part of the spec. */
  description: z.string().optional(),
  /** Secrets a job or sandbox naming this template may ask for in its own secretEnv. */
  allowedSecrets: allowedSecrets.optional(),
  /** A warm pool of sandboxes made from this template (pod-lifecycle keeps it filled). */
  pool: PoolSchema.optional(),
  /** Only these tenants may claim from the pool (absent: any tenant). Needs `pool`. */
  tenants: z.array(tenantName).min(1, 'tenants must name at least one tenant').max(1000).optional(),
});

/** What the operator grants a tenant whatever template it uses. */
export const TenantPolicySchema = strictObject({
  /** Secrets this tenant's requests may ask for in their own secretEnv. */
  allowedSecrets: allowedSecrets.optional(),
});

const templateName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'template names are lowercase letters, digits, "-" and "."');

export const TemplatesFileSchema = strictObject({
  /** Applied under every template (the "defaults" layer of request > template > defaults). */
  defaults: SpecOverridesSchema.optional(),
  templates: z.record(templateName, TemplateSchema),
  /** Template used when a request names none; must exist in `templates`. */
  defaultTemplate: z.string().optional(),
  /** Per tenant: what its requests may ask for beyond what their template allows. */
  tenants: z.record(z.string(), TenantPolicySchema).optional(),
});
export type TemplatesFile = z.output<typeof TemplatesFileSchema>;

/** What a caller asks for: a template name and its own overrides (the top layer). */
export const TemplateRequestSchema = z.object({
  template: z.string().optional(),
  spec: SpecOverridesSchema.optional(),
});
export type TemplateRequest = { template?: string; spec?: SpecOverrides };
