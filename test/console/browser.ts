import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** Debian's chromium (scripts/system-packages.mjs installs it for `npm test`). */
export const CHROMIUM = ['/usr/bin/chromium', '/usr/lib/chromium/chromium'].find((p) => existsSync(p));

export async function launchChromium(): Promise<Browser> {
  if (!CHROMIUM) throw new Error('chromium is not installed: apt-get install chromium');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
}

/**
 * A page that records what must never happen on the console: an error on its console or an
 * uncaught exception, and a request to anywhere but the API it was served by.
 */
export interface WatchedPage {
  page: Page;
  consoleErrors: string[];
  foreignRequests: string[];
}

export async function watchedPage(context: BrowserContext, origin: string): Promise<WatchedPage> {
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  const foreignRequests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(`${message.text()} (${message.location().url})`);
  });
  page.on('pageerror', (err) => consoleErrors.push(`uncaught: ${err.message}`));
  const host = new URL(origin).host;
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.protocol === 'data:' || url.protocol === 'blob:') return;
    if (url.host !== host) foreignRequests.push(request.url());
  });
  // A WebSocket is not a `request` event: checked on its own.
  page.on('websocket', (socket) => {
    if (new URL(socket.url()).host !== host) foreignRequests.push(socket.url());
  });
  return { page, consoleErrors, foreignRequests };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown[] }[];
}

/**
 * axe-core's serious and critical violations on the page as it is now. Evaluated through the
 * DevTools protocol, which the console's CSP (scripts from its own origin only) does not govern.
 */
export async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  // A string, run in the page (the test's own TypeScript has no DOM types).
  const violations = await page.evaluate('axe.run(document).then((result) => result.violations)');
  return (violations as AxeViolation[])
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help} at ${JSON.stringify(v.nodes.slice(0, 3).map((n) => n.target))}`,
    );
}

export async function expectAccessible(page: Page, what: string): Promise<void> {
  expect(await seriousViolations(page), `axe on ${what}`).toEqual([]);
}
