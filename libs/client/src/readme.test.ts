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
