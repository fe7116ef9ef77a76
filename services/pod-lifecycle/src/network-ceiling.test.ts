import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@sandstream/telemetry';
import { afterAll, describe, expect, it } from 'vitest';
import { openNetworkCeiling } from './network-ceiling.js';

const dir = mkdtempSync(join(tmpdir(), 'network-ceiling-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('openNetworkCeiling', () => {
  it('reads the template policy, and the default for a sandbox of no template, with templates that name no image', async () => {
    const file = join(dir, 'templates.yaml');
    writeFileSync(
      file,
      [
        'templates:',
        '  open:',
        '    startDeadlineSeconds: 60',
        '  locked:',
        '    network: deny-egress',
        '  listed:',
        '    image: busybox',
        '    network: { egress: { allow: ["10.0.0.0/8"] } }',
        '',
      ].join('\n'),
    );
    const ceiling = await openNetworkCeiling(file, createLogger({ service: 'test', level: 'silent' }));
    try {
      // A live sandbox made from an image alone: the default, internet (was `none`: the resolve threw).
      expect(ceiling.ceiling(undefined)).toBe('internet');
      expect(ceiling.ceiling('open')).toBe('internet');
      expect(ceiling.ceiling('locked')).toBe('none');
      expect(ceiling.ceiling('listed')).toEqual({ allow: ['10.0.0.0/8'] });
      // A template gone from the file: nothing wider than none is known to be allowed.
      expect(ceiling.ceiling('removed')).toBe('none');
    } finally {
      ceiling.close();
    }
  });
});
