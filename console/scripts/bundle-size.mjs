// Prints the gzipped size of what the console loads, with and without the terminal chunk
// (xterm.js, loaded only by a sandbox page), and fails the build when the rest passes its budget.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const BUDGET_BYTES = 250 * 1024;
const dir = new URL('../dist/assets/', import.meta.url).pathname;
let rest = 0;
let terminal = 0;
for (const name of readdirSync(dir)) {
  const gz = gzipSync(readFileSync(join(dir, name))).length;
  // Vite names a lazily imported chunk after its module: the terminal's is terminal-view-<hash>.
  if (/^(terminal-view|xterm)/.test(name)) terminal += gz;
  else rest += gz;
}
const kb = (n) => `${(n / 1024).toFixed(1)} kB`;
console.log(
  `console bundle: ${kb(rest)} gzipped without xterm (budget ${kb(BUDGET_BYTES)}), terminal chunk ${kb(terminal)}`,
);
if (rest > BUDGET_BYTES) {
  console.error(`console bundle: ${kb(rest)} is over the ${kb(BUDGET_BYTES)} budget`);
  process.exit(1);
}
