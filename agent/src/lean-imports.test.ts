import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = fileURLToPath(new URL('.', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'testing' ? [] : sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe("the agent's imports", () => {
  /**
   * Idle agent memory (docs/benchmarks.md, part 3): a module that builds zod schemas, once in the
   * bundle's static graph, puts its schema objects in every agent's start-up heap. The agent
   * takes values from `@sandstream/wire/lean` (zod-free, lean.test.ts) and loads the full wire
   * only on demand (full-wire.ts); types may come from anywhere.
   */
  it('loads neither zod nor the full wire at start: only types, or full-wire.ts on demand', () => {
    const offending: string[] = [];
    for (const file of sources(src)) {
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms)) {
        const spec = match[1] as string;
        if (spec === 'zod' || spec === '@sandstream/wire') offending.push(`${relative(src, file)}: ${spec}`);
      }
    }
    expect(offending).toEqual([]);
    expect(readFileSync(join(src, 'full-wire.ts'), 'utf8')).toContain("import('@sandstream/wire')");
  });
});
