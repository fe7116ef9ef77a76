import {
  type BuiltTemplates,
  builtTemplateInfo,
  type TemplateInfo,
  TemplateNotFoundError,
  TemplateRefSchema,
} from '@sandstream/bus';
import { parseOptions } from './client-options.js';

/** What a transport does for `client.templates` (Redis: RedisTemplateTransport; HTTP: the API). */
export interface TemplateTransport {
  list(): Promise<TemplateInfo[]>;
  delete(name: string): Promise<void>;
}

/**
 * The deployment's templates (docs/templates.md): the operator's file and the ones `sandstream
 * template build` registered. Over HTTP the API answers both; over Redis only the built ones are
 * there to read (the file is the services' own, mounted where they run, never in Redis).
 */
export class Templates {
  constructor(private readonly transport: TemplateTransport) {}

  /** Every template this transport can see, by name. */
  list(): Promise<TemplateInfo[]> {
    return this.transport.list();
  }

  /**
   * Unregisters a built template (its image stays on the engine: sandboxes may still run it).
   * TemplateNotFoundError when none has the name; over HTTP, FileTemplateError for one of the
   * operator's, and a 403 SandstreamApiError for a key that is not an admin's (a built template
   * serves every tenant).
   */
  async delete(name: string): Promise<void> {
    await this.transport.delete(parseOptions(TemplateRefSchema, name, 'name'));
  }
}

/** Built templates straight from the namespace's registry (libs/bus BuiltTemplates). */
export class RedisTemplateTransport implements TemplateTransport {
  constructor(private readonly registry: BuiltTemplates) {}

  async list(): Promise<TemplateInfo[]> {
    return (await this.registry.list()).map((t) => builtTemplateInfo(t));
  }

  async delete(name: string): Promise<void> {
    if (!(await this.registry.remove(name))) throw new TemplateNotFoundError(name);
  }
}
