import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '@sandstream/test-support';
import { describe, expect, it } from 'vitest';
import { ExitCodes } from './cli/exit-codes.js';

// The README's "Using it" section is what a new user copies: it must say what the code does.
const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const usingIt = readme.slice(
  readme.indexOf('## Using it'),
  readme.indexOf('\n## ', readme.indexOf('## Using it') + 1),
);

describe('README "Using it"', () => {
  it('lists examples/hello.yaml exactly as the file is', () => {
    const listing = /A job file \(`examples\/hello\.yaml`\):\n\n```yaml\n([\s\S]*?)```/.exec(usingIt)?.[1];
    expect(listing).toBe(readFileSync(join(repoRoot, 'examples/hello.yaml'), 'utf8'));
  });

  it('documents every CLI exit code', () => {
    const paragraph = /Exit codes of[\s\S]*?\n\n/.exec(usingIt)?.[0].replace(/\s+/g, ' ') ?? '';
    for (const code of Object.values(ExitCodes)) expect(paragraph).toMatch(new RegExp(`\\b${code} `));
    expect(paragraph).toContain(
      '4 when `status`, `logs` or `cancel` names a job (or a `sandbox` command a sandbox) that does not exist',
    );
    expect(paragraph).toContain('125 when Sandstream itself failed');
  });

  it("shows the SDK's options by their current names", () => {
    const sdk = /new SandstreamClient\(\{([^}]*)\}\)/.exec(usingIt)?.[1] ?? '';
    expect(sdk).toContain('namespace:');
    expect(sdk).not.toContain('prefix');
  });
});

// What the README and examples/ name as a sandbox's image must be on the engine after a fresh
// quick start: one of the images `npm run images` builds (scripts/images), none pulled.
describe('images named by the README and examples/', () => {
  const LOCAL_IMAGES = ['sandstream/debian:bookworm', 'sandstream/busybox:static'];
  const examples = ['examples/hello.yaml', 'examples/python/agent_loop.py', 'examples/python/sandstream.py'];
  const codeBlocks = [...readme.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
  const sources: [string, string][] = [
    ...codeBlocks.map((block, i): [string, string] => [`README code block ${i + 1}`, block]),
    ...examples.map((file): [string, string] => [file, readFileSync(join(repoRoot, file), 'utf8')]),
  ];
  it.each(sources)('%s names only local images', (_where, text) => {
    const named = [
      ...text.matchAll(/\bimage\s*[:=]\s*['"]?([a-z0-9][\w./-]*:[\w.-]+)/g),
      ...text.matchAll(/--image[ =]['"]?([a-z0-9][\w./-]*:[\w.-]+)/g),
      ...text.matchAll(/sandbox create ([a-z0-9][\w./-]*:[\w.-]+)/g),
    ].map((m) => m[1]);
    for (const image of named) expect(LOCAL_IMAGES).toContain(image);
  });
  it('the Python example creates its sandbox from the API default unless given --image', () => {
    const loop = readFileSync(join(repoRoot, 'examples/python/agent_loop.py'), 'utf8');
    expect(loop).toMatch(/add_argument\("--image", default=None/);
  });
});
