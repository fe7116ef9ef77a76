import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { HttpProblem, sendProblem } from './problem.js';

/**
 * Where `npm run build` puts the web console (console/dist): beside this package in the repo,
 * from src/ (tests) and dist/ alike. API_CONSOLE_DIR names another (an image that copies it).
 */
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../../console/dist/', import.meta.url));

/**
 * The console's pages load scripts, styles and fonts from this origin only and talk to this API
 * only (fetch, and the shell's WebSocket, which 'self' covers): no request leaves the machine.
 * xterm.js sets inline styles on its rows, hence 'unsafe-inline' for styles alone.
 */
const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

/** The console's own paths: its page and its hashed assets. Anyone may load them (no data in them). */
export function isConsolePath(path: string): boolean {
  return path === '/' || path === '/index.html' || path.startsWith('/assets/');
}

/**
 * Serves the web console's static files at `/` (index.html) and `/assets/…`. Only the files that
 * exist when the API starts get routes (no wildcard), so no API path is shadowed and an unknown
 * path is still the API's 404 problem. Without a build, `/` says how to make one.
 */
export async function consoleFiles(app: FastifyInstance, dir: string): Promise<void> {
  if (!existsSync(`${dir}/index.html`)) {
    app.get('/', { schema: { hide: true } }, (request, reply) =>
      sendProblem(
        request,
        reply,
        new HttpProblem(
          404,
          'not-found',
          `the web console is not built (no ${dir}/index.html): run npm run build`,
        ),
      ),
    );
    return;
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/',
    wildcard: false,
    index: ['index.html'],
    // Asset names carry their content's hash: cached for good; index.html is asked again each time.
    cacheControl: false,
    setHeaders: (res, path) => {
      res.header('content-security-policy', CONSOLE_CSP);
      res.header('x-content-type-options', 'nosniff');
      res.header(
        'cache-control',
        path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
      );
    },
  });
}
