import { z } from 'zod';

/**
 * An operator's customisation of the sandbox pod: a partial Pod (or just its metadata/spec),
 * as in seeds/002 (extra volumes, node scheduling, private registries, sidecars). The inner spec
 * is kept as plain JSON: the API server is the authority on its shape, and the merge only needs
 * to know which arrays are keyed by name.
 */
export const PodTemplateSchema = z.looseObject({
  apiVersion: z.string().optional(),
  kind: z
    .string()
    .refine(
      (k) => k === 'Pod' || k === 'PodTemplate',
      'podTemplate.kind must be Pod or PodTemplate when given',
    )
    .optional(),
  metadata: z
    .looseObject({
      labels: z.record(z.string(), z.string()).optional(),
      annotations: z.record(z.string(), z.string()).optional(),
    })
    .optional(),
  spec: z.record(z.string(), z.unknown()).optional(),
  /** kind: PodTemplate wraps the pod in `template`. */
  template: z
    .looseObject({
      metadata: z.record(z.string(), z.unknown()).optional(),
      spec: z.record(z.string(), z.unknown()).optional(),
    })
    .optional(),
});
export type PodTemplate = z.infer<typeof PodTemplateSchema>;

export type JsonObject = { [key: string]: unknown };

/** The metadata + spec part of a template, whichever wrapping the operator used. */
export function templateBody(template: PodTemplate): { metadata: JsonObject; spec: JsonObject } {
  const inner = template.template ?? template;
  return {
    metadata: (inner.metadata as JsonObject | undefined) ?? {},
    spec: (inner.spec as JsonObject | undefined) ?? {},
  };
}

/** Parses with an error that names the offending field. */
export function parsePodTemplate(value: unknown, source: string): PodTemplate {
  const parsed = PodTemplateSchema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${[source, ...i.path].join('.')}: ${i.message}`);
    throw new Error(issues.join('; '));
  }
  return parsed.data;
}
