import { JobIdSchema } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { logArchiveNames } from './log-archive-names.js';

describe('logArchiveNames', () => {
  const names = logArchiveNames({ namespace: 'dev-1' });

  it('names the stream after the namespace and gives each job one subject under its wildcard', () => {
    expect(names.stream).toBe('SANDSTREAM_LOGS_DEV-1');
    expect(names.subjects).toBe('sandstream.dev-1.logs.>');
    expect(names.subject('build-42')).toBe('sandstream.dev-1.logs.build-42');
  });

  it('gives every valid job id, dots and all, a subject of non-empty tokens, one id one subject', () => {
    const ids = ['a..b', 'a.', 'a.b', 'a~b'.replace('~', '.'), 'x:y_z-1'];
    for (const id of ids) {
      if (!JobIdSchema.safeParse(id).success) continue;
      const subject = names.subject(id);
      expect(subject.split('.').every((token) => token.length > 0)).toBe(true);
    }
    expect(names.subject('a..b')).not.toBe(names.subject('a.b'));
    expect(names.subject('a.b')).toBe('sandstream.dev-1.logs.a~b');
  });
});
