import { formatIssues } from '@sandstream/wire';
import { z } from 'zod';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

/** A template name: what `template:` in a job or sandbox spec says, and a Docker tag can hold. */
export const TemplateNameSchema = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9._-]{0,62}$/,
    'a template name is 1-63 characters: lower-case letters, digits, ".", "_" and "-", starting with a letter or digit',
  );

/**
 * A template `sandstream template build` made: an image built on the engine, registered under a
 * name every scheduler resolves (beside the operator's templates file, which wins on a clash).
 */
export const BuiltTemplateSchema = z
  .object({
    name: TemplateNameSchema,
    /** The image tag sandboxes of it run (one per build: `sandstream-template/<name>:<id>`). */
    image: z.string().min(1).max(512),
    /** The engine's image id (sha256:…), so a rebuild is told from the one before. */
    imageId: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'imageId must be sha256:<64 hex>'),
    /** Epoch ms of the registration. */
    builtAt: z.number().int(),
  })
  .strict();
export type BuiltTemplate = z.infer<typeof BuiltTemplateSchema>;

/**
 * The registry of built templates: one Redis hash of the namespace, read by every scheduler at
 * each resolution (one HGET), written by whoever builds. Redis, not the templates file: the file
 * is the operator's (a ConfigMap, a compose mount) and no service or CLI may write it, while every
 * service already shares this Redis, so a build is usable by all of them the moment it is
 * registered, with nothing to reload and nothing kept in any process.
 */
export class BuiltTemplates {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
  ) {}

  async register(template: BuiltTemplate): Promise<void> {
    const parsed = BuiltTemplateSchema.safeParse(template);
    if (!parsed.success) throw new Error(`built template: ${formatIssues(parsed.error, 'template')}`);
    await this.redis.hset(this.keys.builtTemplates, parsed.data.name, JSON.stringify(parsed.data));
  }

  /** The template of that name, or undefined (also for an entry that no longer parses). */
  async get(name: string): Promise<BuiltTemplate | undefined> {
    const raw = await this.redis.hget(this.keys.builtTemplates, name);
    return raw ? parseEntry(raw) : undefined;
  }

  async list(): Promise<BuiltTemplate[]> {
    const all = await this.redis.hgetall(this.keys.builtTemplates);
    return Object.values(all)
      .map(parseEntry)
      .filter((t): t is BuiltTemplate => t !== undefined)
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** False when there was none of that name. The image stays on the engine (sandboxes may run it). */
  async remove(name: string): Promise<boolean> {
    return (await this.redis.hdel(this.keys.builtTemplates, name)) === 1;
  }
}

function parseEntry(raw: string): BuiltTemplate | undefined {
  try {
    const parsed = BuiltTemplateSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
