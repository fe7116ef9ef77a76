import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { formatIssues } from '@sandstream/wire';
import { type SandboxSpec, SandboxSpecSchema } from '../sandbox-spec.js';
import { loadTemplatesFile, TemplateFileError } from './load-templates.js';
import { mergeSpecLayers } from './merge-spec.js';
import { type TemplateRequest, TemplateRequestSchema, type TemplatesFile } from './template-schema.js';

export class TemplateResolveError extends Error {
  override readonly name = 'TemplateResolveError';
}

/** A template's warm pool, as declared now. */
export interface DeclaredPool {
  name: string;
  min: number;
  max: number;
  /** Tenants the pool serves; null: any. */
  tenants: string[] | null;
  /** What every member is made from. */
  spec: SandboxSpec;
}

export interface TemplateRegistryOptions {
  path: string;
  /** Reload when the file changes. Off for one-shot tools (CLI validation). */
  watch?: boolean;
  /** Quiet time after the last change before reloading: editors write a file in several steps. */
  debounceMs?: number;
  /** Told about every reload, good or bad; a bad one keeps the previous templates in force. */
  onReload?: (event: { ok: true; templates: string[] } | { ok: false; error: Error }) => void;
  /** Built-in defaults under the file's own `defaults` (lowest layer). */
  defaults?: Record<string, unknown>;
}

/**
 * Named sandbox templates from a YAML/JSON file, resolved as request > template > file defaults >
 * built-in defaults into a validated SandboxSpec. The file is watched through its directory (an
 * editor's save-by-rename replaces the inode a file watch would follow) and reloaded after a
 * debounce; an invalid file is reported and the last good version stays in use.
 */
export class TemplateRegistry {
  private current: TemplatesFile;
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private reloading: Promise<void> = Promise.resolve();
  private lastErrorValue: Error | undefined;

  private constructor(
    private readonly options: TemplateRegistryOptions,
    initial: TemplatesFile,
  ) {
    this.current = initial;
  }

  /** Loads the file (throwing TemplateFileError when it is invalid) and starts watching it. */
  static async open(options: TemplateRegistryOptions): Promise<TemplateRegistry> {
    const registry = new TemplateRegistry(options, await loadTemplatesFile(options.path));
    if (options.watch !== false) registry.startWatching();
    return registry;
  }

  /** The error of the last reload when it failed; cleared by a good reload. */
  get lastError(): Error | undefined {
    return this.lastErrorValue;
  }

  names(): string[] {
    return Object.keys(this.current.templates);
  }

  resolve(request: TemplateRequest = {}): SandboxSpec {
    const parsedRequest = TemplateRequestSchema.safeParse(request);
    if (!parsedRequest.success) {
      throw new TemplateResolveError(
        `invalid sandbox request: ${formatIssues(parsedRequest.error, 'request')}`,
      );
    }
    const file = this.current;
    const name = request.template ?? file.defaultTemplate;
    let templateLayer: Record<string, unknown> = {};
    if (name !== undefined) {
      const template = file.templates[name];
      if (!template) {
        throw new TemplateResolveError(
          `unknown template "${name}"; known templates: ${this.names().join(', ') || '(none)'}`,
        );
      }
      const {
        description: _description,
        allowedSecrets: _allowed,
        pool: _pool,
        tenants: _tenants,
        ...spec
      } = template;
      templateLayer = spec;
    }
    const merged = mergeSpecLayers(
      this.options.defaults,
      file.defaults,
      templateLayer,
      request.spec as Record<string, unknown> | undefined,
      name === undefined ? undefined : { template: name },
    );
    const parsed = SandboxSpecSchema.safeParse(merged);
    if (!parsed.success) {
      const where = name === undefined ? 'request' : `template "${name}" with the request`;
      throw new TemplateResolveError(
        `${where} does not make a valid sandbox spec: ${formatIssues(parsed.error)}`,
      );
    }
    return parsed.data;
  }

  /**
   * The warm pools the file declares, each with the spec its members are made from (the template
   * resolved with no request on top) as the file says now.
   */
  pools(): DeclaredPool[] {
    const out: DeclaredPool[] = [];
    for (const [name, template] of Object.entries(this.current.templates)) {
      if (!template.pool) continue;
      out.push({
        name,
        min: template.pool.min,
        max: template.pool.max,
        tenants: template.tenants ?? null,
        spec: this.resolve({ template: name }),
      });
    }
    return out;
  }

  /**
   * The secret names a request may ask for in its own secretEnv: the allow-list of the template
   * it names (or the default template) and its tenant's, as the file says now.
   */
  allowedSecrets(template: string | undefined, tenant: string): Set<string> {
    const file = this.current;
    const name = template ?? file.defaultTemplate;
    const fromTemplate = name === undefined ? [] : (file.templates[name]?.allowedSecrets ?? []);
    return new Set([...fromTemplate, ...(file.tenants?.[tenant]?.allowedSecrets ?? [])]);
  }

  /** Reloads now; resolves after the attempt (a failure is reported, not thrown). */
  reload(): Promise<void> {
    this.reloading = this.reloading.then(async () => {
      try {
        this.current = await loadTemplatesFile(this.options.path);
        this.lastErrorValue = undefined;
        this.options.onReload?.({ ok: true, templates: this.names() });
      } catch (err) {
        const error = err instanceof Error ? err : new TemplateFileError(String(err));
        this.lastErrorValue = error;
        this.options.onReload?.({ ok: false, error });
      }
    });
    return this.reloading;
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.timer) clearTimeout(this.timer);
  }

  private startWatching(): void {
    const file = basename(this.options.path);
    this.watcher = watch(dirname(this.options.path), { persistent: false }, (_event, changed) => {
      if (changed !== null && changed !== file) return;
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.reload(), this.options.debounceMs ?? 200);
      this.timer.unref();
    });
    this.watcher.on('error', (error) => {
      this.lastErrorValue = error;
      this.options.onReload?.({ ok: false, error });
    });
  }
}
