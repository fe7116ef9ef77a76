import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type GrepStep, GrepStepSchema, Limits, type StepOutput } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GREP_MAX_FILE_BYTES } from './grep-line.js';
import { grepStep } from './grep-step.js';
import { recordingContext } from './recording-context.js';
import { findRipgrep, locate } from './ripgrep-locator.js';

let dir: string;
const longLine = `${'x'.repeat(5000)}needle${'y'.repeat(5000)}`;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-grep-'));
  const file = (rel: string, content: string | Buffer) =>
    mkdir(path.dirname(path.join(dir, rel)), { recursive: true }).then(() =>
      writeFile(path.join(dir, rel), content),
    );
  await file('src/app.ts', 'import x from "y";\nconst needle = 1;\n// Needle again\n');
  await file('src/util/strings.ts', 'export const a = "needle(1)";\nno match here\n');
  await file('src/util/crlf.ts', 'first needle\r\nsecond\r\nthird needle\r\n');
  await file('src-old/app.js', 'var needle;\n');
  await file('README.md', 'über needle — the thing\nlast line without newline needle');
  await file('long.txt', `${longLine}\n`);
  await file('.hidden/secret.ts', 'needle in hidden\n');
  await file('.env', 'NEEDLE=1\n');
  await file('bin/data.bin', Buffer.concat([Buffer.from('needle\n'), Buffer.from([0, 1, 2])]));
  await file('many/lines.txt', Array.from({ length: 300 }, (_, i) => `needle ${i}`).join('\n'));
  await file('huge/big.txt', `needle\n${'z'.repeat(GREP_MAX_FILE_BYTES)}\n`);
  await symlink('src/app.ts', path.join(dir, 'link-to-app.ts'));
  await symlink('src', path.join(dir, 'link-to-src'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const step = (fields: Record<string, unknown>): GrepStep =>
  GrepStepSchema.parse({ schemaVersion: 1, stepId: 'g', kind: 'grep', ...fields });

type GrepOutput = Extract<StepOutput, { kind: 'grep' }>;
async function grep(fields: Record<string, unknown>, engine: 'auto' | 'builtin' = 'auto') {
  const outcome = await grepStep(step(fields), recordingContext(dir).ctx, { engine });
  return { outcome, output: outcome.output as GrepOutput | undefined };
}

describe('grepStep', () => {
  it('uses ripgrep when it is on PATH', async () => {
    expect(await findRipgrep()).toBe('/usr/bin/rg');
    expect((await grep({ pattern: 'needle' })).output?.engine).toBe('ripgrep');
    expect((await grep({ pattern: 'needle' }, 'builtin')).output?.engine).toBe('builtin');
  });

  it('falls back to the builtin engine when ripgrep is missing', async () => {
    expect(await locate('/nonexistent-dir')).toBeNull();
    const outcome = await grepStep(step({ pattern: 'needle', path: 'src' }), recordingContext(dir).ctx, {
      locateRipgrep: async () => null,
    });
    expect((outcome.output as GrepOutput).engine).toBe('builtin');
  });

  it.each(['auto', 'builtin'] as const)(
    '%s: finds matches with path, line, byte column and text',
    async (engine) => {
      const { output } = await grep({ pattern: 'needle', path: 'src', maxMatches: 100 }, engine);
      expect(output?.truncated).toBe(false);
      expect(output?.matches).toEqual([
        { path: 'app.ts', line: 2, column: 7, text: 'const needle = 1;' },
        { path: 'util/crlf.ts', line: 1, column: 7, text: 'first needle' },
        { path: 'util/crlf.ts', line: 3, column: 7, text: 'third needle' },
        { path: 'util/strings.ts', line: 1, column: 19, text: 'export const a = "needle(1)";' },
      ]);
    },
  );

  it.each(['auto', 'builtin'] as const)(
    '%s: skips hidden, binary, symlinked and oversized files',
    async (engine) => {
      const { output } = await grep({ pattern: 'needle', ignoreCase: true, maxMatches: 1000 }, engine);
      const files = new Set(output?.matches.map((m) => m.path));
      expect(files).toEqual(
        new Set([
          'README.md',
          'long.txt',
          'many/lines.txt',
          'src/app.ts',
          'src/util/crlf.ts',
          'src/util/strings.ts',
          'src-old/app.js',
        ]),
      );
    },
  );

  it.each(['auto', 'builtin'] as const)(
    '%s: counts columns in UTF-8 bytes and keeps a last line without newline',
    async (engine) => {
      const { output } = await grep({ pattern: 'needle', path: 'README.md' }, engine);
      expect(output?.matches).toEqual([
        { path: 'README.md', line: 1, column: 7, text: 'über needle — the thing' },
        { path: 'README.md', line: 2, column: 27, text: 'last line without newline needle' },
      ]);
    },
  );

  it.each(['auto', 'builtin'] as const)('%s: cuts long lines around the match', async (engine) => {
    const { output } = await grep({ pattern: 'needle', path: 'long.txt' }, engine);
    const match = output?.matches[0];
    expect(match?.column).toBe(5001);
    expect(match?.text.length).toBe(Limits.grepMaxLineChars);
    expect(match?.text).toContain('needle');
  });

  it.each(['auto', 'builtin'] as const)(
    '%s: enforces maxMatches across files and says it cut',
    async (engine) => {
      const five = await grep({ pattern: 'needle', maxMatches: 5 }, engine);
      expect(five.output?.matches).toHaveLength(5);
      expect(five.output?.truncated).toBe(true);
      const byDefault = await grep({ pattern: 'needle', path: 'many' }, engine);
      expect(byDefault.output?.matches).toHaveLength(Limits.grepDefaultMaxMatches);
      expect(byDefault.output?.truncated).toBe(true);
      const exact = await grep({ pattern: 'needle', path: 'src', maxMatches: 4 }, engine);
      expect(exact.output?.matches).toHaveLength(4);
      expect(exact.output?.truncated).toBe(false);
    },
  );

  it.each(['auto', 'builtin'] as const)('%s: answers an invalid regex with invalid_step', async (engine) => {
    const { outcome } = await grep({ pattern: 'needle(' }, engine);
    expect(outcome).toMatchObject({ errorCode: 'invalid_step', exitCode: null });
    expect(outcome.errorMessage).toMatch(/pattern|regex/i);
  });

  it.each(['auto', 'builtin'] as const)(
    '%s: survives a catastrophically backtracking pattern',
    async (engine) => {
      // Exponential for a backtracking engine: without the linear fallback this takes many seconds.
      await writeFile(path.join(dir, 'redos.txt'), `${'a'.repeat(28)}b\n`);
      const started = Date.now();
      const { output } = await grep({ pattern: '(a+)+$', path: 'redos.txt' }, engine);
      expect(output?.matches).toEqual([]);
      expect(Date.now() - started).toBeLessThan(2000);
    },
  );

  it.each(['auto', 'builtin'] as const)('%s: answers a missing path with not_found', async (engine) => {
    expect((await grep({ pattern: 'x', path: 'nope' }, engine)).outcome.errorCode).toBe('not_found');
  });

  it.each(['auto', 'builtin'] as const)('%s: stops when cancelled', async (engine) => {
    const r = recordingContext(dir);
    r.abort.abort();
    const outcome = await grepStep(step({ pattern: 'needle' }), r.ctx, { engine });
    expect(outcome.errorCode).toBe('cancelled');
  });
});

describe('grepStep: ripgrep and the builtin engine agree', () => {
  const queries: Record<string, unknown>[] = [
    { pattern: 'needle' },
    { pattern: 'needle', ignoreCase: true, maxMatches: 1000 },
    { pattern: 'needle(1)', fixedStrings: true },
    { pattern: 'needle\\(\\d\\)' },
    { pattern: '^(third|first) ', path: 'src' },
    { pattern: 'needle', glob: '*.ts' },
    { pattern: 'needle', glob: 'src/*.ts' },
    { pattern: 'needle', glob: '**/util/*.ts' },
    { pattern: 'needle', glob: 'util/*.ts' },
    { pattern: 'needle', glob: '/src/*.ts' },
    { pattern: 'needle', glob: '!*.md', maxMatches: 1000 },
    { pattern: 'needle', glob: '*.{js,md}' },
    { pattern: 'needle \\d+$', path: 'many', maxMatches: 250 },
    { pattern: 'needle', maxMatches: 3 },
    { pattern: 'NEEDLE', ignoreCase: false },
    { pattern: 'a', workingDirectory: 'src', path: 'util' },
  ];
  it.each(queries)('%j', async (query) => {
    const viaRipgrep = await grep(query, 'auto');
    const viaBuiltin = await grep(query, 'builtin');
    expect(viaRipgrep.output?.engine).toBe('ripgrep');
    expect(viaBuiltin.output?.engine).toBe('builtin');
    expect(viaBuiltin.output?.matches).toEqual(viaRipgrep.output?.matches);
    expect(viaBuiltin.output?.truncated).toBe(viaRipgrep.output?.truncated);
  });
});
