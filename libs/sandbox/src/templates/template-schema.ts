import { z } from 'zod';
import { SandboxSpecSchema } from '../sandbox-spec.js';

/**
 * The spec's own fields, every one optional and without its default: a template or a request
 * only says what it changes, and defaults are applied once, after merging. Unknown keys are
 * refused so that a typo ("imgae") is an error, not a silently ignored line.
 */
function overrideShape() {
  const shape: Record<string, z.ZodType> = {};
  for (const [key, field] of Object.entries(SandboxSpecSchema.shape)) {
    const inner = field instanceof z.ZodDefault ? field.unwrap() : field;
    shape[key] = inner instanceof z.ZodOptional ? inner : inner.optional();
  }
  return shape as { [K in keyof typeof SandboxSpecSchema.shape]: z.ZodOptional<z.ZodType> };
}

export const SpecOverridesSchema = z.strictObject(overrideShape()).omit({ template: true });
export type SpecOverrides = Partial<z.input<typeof SandboxSpecSchema>>;

export const TemplateSchema = SpecOverridesSchema.extend({
  /** Free text for operators and `sandstream templates`; not part of the spec. */
  description: z.string().optional(),
});

const templateName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'template names are lowercase letters, digits, "-" and "."');

export const TemplatesFileSchema = z.strictObject({
  /** Applied under every template (the "defaults" layer of request > template > defaults). */
  defaults: SpecOverridesSchema.optional(),
  templates: z.record(templateName, TemplateSchema),
  /** Template used when a request names none; must exist in `templates`. */
  defaultTemplate: z.string().optional(),
});
export type TemplatesFile = z.output<typeof TemplatesFileSchema>;

/** What a caller asks for: a template name and its own overrides (the top layer). */
export const TemplateRequestSchema = z.object({
  template: z.string().optional(),
  spec: SpecOverridesSchema.optional(),
});
export type TemplateRequest = { template?: string; spec?: SpecOverrides };
