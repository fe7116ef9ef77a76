import type { BuiltTemplate, StoredSpec } from '@sandstream/bus';
import { describeEgress, type Egress, egressOf, SpecNetworkSchema } from '@sandstream/wire';

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
  /** The secret names a request naming `template` (or none) for `tenant` may ask for. */
  allowedSecrets(template: string | undefined, tenant: string): Set<string>;
  /** The names the source knows (a name it lacks may be a built template). */
  names(): string[];
}

/** Templates `sandstream template build` registered (libs/bus BuiltTemplates fits). */
export interface BuiltTemplateSource {
  get(name: string): Promise<BuiltTemplate | undefined>;
}

/**
 * Turns a job spec into a sandbox spec. With a template source, the job's image, env, resources
 * and labels are the top layer over the named template; its errors (unknown template, a merge
 * that is not a valid spec) fail the job with their message. Without one, only image jobs
 * work, and a template job fails with a message saying so.
 */
export class TemplateResolver {
  constructor(
    private readonly templates?: TemplateSource,
    private readonly built?: BuiltTemplateSource,
  ) {}

  async resolve(spec: StoredSpec): Promise<ResolvedSandbox> {
    // A name the operator's file does not have may be a built template: its image replaces the
    // default template's (the file's defaults and default template still apply), as if the job
    // had named that image. The file wins a clash: its templates are the operator's word.
    if (spec.template !== undefined && this.built && !this.templates?.names().includes(spec.template)) {
      const built = await this.built.get(spec.template);
      if (built) {
        const asImage = await this.resolve({
          ...spec,
          template: undefined,
          image: spec.image ?? built.image,
        });
        return { sandbox: { ...asImage.sandbox, template: built.name }, template: built.name };
      }
    }
    const overrides: Record<string, unknown> = {};
    if (spec.image !== undefined) overrides.image = spec.image;
    if (Object.keys(spec.env).length > 0) overrides.env = spec.env;
    if (Object.keys(spec.labels).length > 0) overrides.labels = spec.labels;
    if (Object.keys(spec.resources).length > 0) overrides.resources = spec.resources;
    // A live sandbox may set its workspace and network; a job takes its template's.
    if ('workingDirectory' in spec && spec.workingDirectory !== undefined)
      overrides.workingDirectory = spec.workingDirectory;
    // A request may only narrow the network: `default` never loosens a deny-egress template.
    const requested = 'network' in spec && spec.network !== undefined ? egressOf(spec.network) : undefined;
    if (requested === 'none') overrides.network = { egress: 'none' };
    const secrets = Object.entries(spec.secretEnv ?? {});
    if (secrets.length > 0) {
      // Only names the operator granted: a request could otherwise name any secret of the backend.
      if (!this.templates) {
        throw new TemplateResolutionError(
          'secretEnv needs an operator allow-list (allowedSecrets in the templates file, SANDSTREAM_TEMPLATES_FILE); this scheduler has none',
        );
      }
      const allowed = this.templates.allowedSecrets(spec.template, spec.tenant);
      const refused = secrets.filter(([, ref]) => !allowed.has(ref.secretName));
      if (refused.length > 0) {
        const where =
          spec.template === undefined
            ? `tenant "${spec.tenant}"`
            : `template "${spec.template}" or tenant "${spec.tenant}"`;
        throw new TemplateResolutionError(
          refused
            .map(
              ([name, ref]) =>
                `secretEnv.${name}: secret "${ref.secretName}" is not on the allow-list of ${where}`,
            )
            .join('; '),
        );
      }
      overrides.secretEnv = Object.fromEntries(secrets);
    }
    const template = spec.template !== undefined ? { template: spec.template } : {};

    if (this.templates) {
      try {
        const sandbox = this.templates.resolve({ ...template, spec: overrides });
        return { sandbox: narrowNetwork(sandbox, requested, spec.template), ...template };
      } catch (err) {
        throw new TemplateResolutionError(err instanceof Error ? err.message : String(err));
      }
    }
    if (spec.template !== undefined) {
      throw new TemplateResolutionError(
        `template "${spec.template}" cannot be resolved: it is no built template (sandstream template build) and this scheduler has no templates file (SANDSTREAM_TEMPLATES_FILE); submit an image instead`,
      );
    }
    if (spec.image === undefined) throw new TemplateResolutionError('the job names no image');
    return { sandbox: narrowNetwork({ ...overrides, image: spec.image }, requested, spec.template) };
  }
}

/**
 * A request's allow-list replaces an `internet` network (the default) and nothing stricter: a
 * template that says `none` or lists its own allow-list is the operator's ceiling.
 */
function narrowNetwork<T extends Record<string, unknown>>(
  sandbox: T,
  requested: Egress | undefined,
  template: string | undefined,
): T {
  if (requested === undefined || typeof requested === 'string') return sandbox;
  const own = egressOf(SpecNetworkSchema.catch('default').parse(sandbox.network ?? 'default'));
  if (own !== 'internet') {
    const where = template === undefined ? 'the sandbox' : `template "${template}"`;
    const what = own === undefined ? 'no network' : `egress ${describeEgress(own)}`;
    throw new TemplateResolutionError(
      `network: ${where} sets ${what}; a request may only narrow it to "none"`,
    );
  }
  return { ...sandbox, network: { egress: requested } };
}
