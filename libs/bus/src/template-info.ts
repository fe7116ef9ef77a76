import { z } from 'zod';
import type { BuiltTemplate } from './built-templates.js';

/**
 * A template as `GET /v1/templates`, `client.templates.list()` and `sandstream template ls`
 * show it: the operator's (`file`, SANDSTREAM_TEMPLATES_FILE) or one `sandstream template build`
 * registered (`built`). One definition for the API's answer and the SDK's reading of it.
 */
export const TemplateInfoSchema = z.object({
  name: z.string(),
  source: z.enum(['file', 'built']),
  image: z.string().optional(),
  /** Built only: the engine's image id (sha256:…), telling one build from the next. */
  imageId: z.string().optional(),
  /** Built only: when it was registered (ISO 8601). */
  createdAt: z.string().optional(),
  /**
   * Built only: a file template has the same name, and the file wins (what schedulers resolve),
   * so this registration is unused until it is removed or the file drops the name.
   */
  shadowed: z.boolean().optional(),
});
export type TemplateInfo = z.infer<typeof TemplateInfoSchema>;

/**
 * A template name as given to a delete: the union of what the file (any length) and a build
 * (≤ 63, libs/bus TemplateNameSchema) accept, so that a file template is answered "it is the
 * file's" rather than refused for its length.
 */
export const TemplateRefSchema = z
  .string()
  .min(1, 'a template name is at least 1 character')
  .max(253, 'a template name is at most 253 characters')
  .regex(
    /^[a-z0-9][a-z0-9._-]*$/,
    'a template name is lower-case letters, digits, ".", "_" and "-", starting with a letter or digit',
  );

export function builtTemplateInfo(template: BuiltTemplate, shadowed = false): TemplateInfo {
  return {
    name: template.name,
    source: 'built',
    image: template.image,
    imageId: template.imageId,
    createdAt: new Date(template.builtAt).toISOString(),
    ...(shadowed ? { shadowed: true } : {}),
  };
}

/** A delete of a name no built template has (problem kind `template-not-found`). */
export class TemplateNotFoundError extends Error {
  override readonly name = 'TemplateNotFoundError';
  constructor(readonly template: string) {
    super(`no built template named "${template}"`);
  }
}

/**
 * A delete of one of the operator's templates (problem kind `template-in-file`): the file is the
 * operator's (a ConfigMap, a compose mount) and nothing Sandstream runs writes it.
 */
export class FileTemplateError extends Error {
  override readonly name = 'FileTemplateError';
  constructor(readonly template: string) {
    super(
      `template "${template}" comes from the operator's templates file (SANDSTREAM_TEMPLATES_FILE): remove it there, not through Sandstream`,
    );
  }
}
