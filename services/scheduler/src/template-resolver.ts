import type { JobSpec } from '@sandstream/bus';

/** The SandboxSpec input handed to pod-lifecycle (parsed there by libs/sandbox SandboxSpecSchema). */
export interface ResolvedSandbox {
  sandbox: { image: string } & Record<string, unknown>;
  template?: string;
}

export class TemplateResolutionError extends Error {
  override readonly name = 'TemplateResolutionError';
}

/** Looks up a named template; returns null for an unknown name. */
export interface TemplateLookup {
  lookup(name: string): Promise<({ image: string } & Record<string, unknown>) | null>;
}

/**
 * Turns a job spec into a sandbox spec: the template (when named) gives the base, the job's
 * image, env, resources and labels go on top. Without a template lookup only image jobs work,
 * and a template job fails with a message saying so.
 */
export class TemplateResolver {
  constructor(private readonly templates?: TemplateLookup) {}

  async resolve(spec: JobSpec): Promise<ResolvedSandbox> {
    let base: Record<string, unknown> = {};
    if (spec.template !== undefined) {
      if (!this.templates) {
        throw new TemplateResolutionError(
          `template "${spec.template}" cannot be resolved: this scheduler has no template registry; submit an image instead`,
        );
      }
      const found = await this.templates.lookup(spec.template);
      if (!found) throw new TemplateResolutionError(`template "${spec.template}" does not exist`);
      base = found;
    }
    const image = spec.image ?? (base.image as string | undefined);
    if (!image) throw new TemplateResolutionError('neither the job nor its template names an image');
    const baseEnv = (base.env as Record<string, string> | undefined) ?? {};
    const baseLabels = (base.labels as Record<string, string> | undefined) ?? {};
    const hasResources = Object.keys(spec.resources).length > 0;
    return {
      sandbox: {
        ...base,
        image,
        env: { ...baseEnv, ...spec.env },
        labels: { ...baseLabels, ...spec.labels },
        ...(hasResources ? { resources: spec.resources } : {}),
      },
      ...(spec.template !== undefined ? { template: spec.template } : {}),
    };
  }
}
