import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The native spawner as `npm run build` leaves it (agent/dist/runtime/lib). Tests that need it
 * fail with this message rather than skip: a checkout whose build could not compile it is a
 * broken build, not a reason to test less.
 */
export function builtSpawnerPath(): string {
  const path = fileURLToPath(new URL('../../dist/runtime/lib/sandstream-spawner', import.meta.url));
  if (!existsSync(path)) throw new Error(`${path} is missing: run npm run build (needs gcc and libc6-dev)`);
  return path;
}
