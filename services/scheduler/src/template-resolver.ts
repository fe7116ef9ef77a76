import type { StoredSpec } from '@sandstream/bus';

/** The SandboxSpec input handed to pod-lifecycle (parsed there by libs/sandbox SandboxSpecSchema). */
export interface ResolvedSandbox {
  sandbox: { image: string } & Record<string, unknown>;
  template?: string;
}

export class TemplateResolutionError extends Error {
  override readonly name = 'TemplateResolutionError';
}

/** Named templates (libs/sandbox TemplateRegistry fits): request > template > defaults, validated. */
export interface TemplateSource {
  resolve(request: {
    template?: string;
    spec?: Record<string, unknown>;
  }): { image: string } & Record<string, unknown>;
}

/**
 * Turns a job spec into a sandbox spec. With a template source, the job's image, env, resources
 * and labels are the top layer over the named template; its errors (unknown template, a merge
 * that is not a valid spec) fail the job with their message. Without one, only image jobs
 * work, and a template job fails with a message saying so.
 */
export class TemplateResolver {
  constructor(private readonly templates?: TemplateSource) {}

  async resolve(spec: StoredSpec): Promise<ResolvedSandbox> {
    const overrides: Record<string, unknown> = {};
    if (spec.image !== undefined) overrides.image = spec.image;
    if (Object.keys(spec.env).length > 0) overrides.env = spec.env;
    if (Object.keys(spec.labels).length > 0) overrides.labels = spec.labels;
    if (Object.keys(spec.resources).length > 0) overrides.resources = spec.resources;
    const template = spec.template !== undefined ? { template: spec.template } : {};

    if (this.templates) {
      try {
        const sandbox = this.templates.resolve({ ...template, spec: overrides });
        return { sandbox, ...template };
      } catch (err) {
        throw new TemplateResolutionError(err instanceof Error ? err.message : String(err));
      }
    }
    if (spec.template !== undefined) {
      throw new TemplateResolutionError(
        `template "${spec.template}" cannot be resolved: this scheduler has no template registry (set SANDSTREAM_TEMPLATES_FILE); submit an image instead`,
      );
    }
    if (spec.image === undefined) throw new TemplateResolutionError('the job names no image');
    return { sandbox: { ...overrides, image: spec.image } };
  }
}
