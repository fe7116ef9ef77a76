import * as z from 'zod';

/**
 * One line of a watch step (wire step.ts WatchStepSchema) on stdout, as JSON. The first is
 * `watching` (name ""), once the watcher is in place: a change after it is seen. Then one per
 * change, `name` the entry's path relative to the watched directory: the watcher (inotify)
 * tells a name appeared or went (`create`, `remove`; a rename is the pair) or an entry's
 * content or attributes changed (`write`).
 */
export const WatchEventSchema = z.object({
  type: z.enum(['watching', 'create', 'write', 'remove']),
  name: z.string(),
});
export type WatchEvent = z.infer<typeof WatchEventSchema>;
