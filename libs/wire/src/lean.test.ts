import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));

/** The modules `file` loads (value imports and re-exports; `import type` loads nothing). */
function loads(file: string): string[] {
  const source = readFileSync(join(here, file), 'utf8');
  const specifiers: string[] = [];
  for (const match of source.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms))
    specifiers.push(match[1] as string);
  return specifiers;
}

describe('@sandstream/wire/lean', () => {
  it('loads no zod: the agent imports it so that its start-up heap holds no schema', () => {
    const seen = new Set<string>();
    const reached: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const spec of loads(file)) {
        if (spec.startsWith('./')) visit(spec.replace(/\.js$/, '.ts').slice(2));
        else reached.push(`${file} -> ${spec}`);
      }
    };
    visit('lean.ts');
    expect(seen.size).toBeGreaterThan(20);
    expect(reached.filter((edge) => edge.endsWith('-> zod'))).toEqual([]);
    expect([...seen].filter((file) => loads(file).includes('zod'))).toEqual([]);
  });
});
