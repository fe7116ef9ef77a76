import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';

// Issue 27 §6: a job file far over the job spec limit (32 MiB as stored) is refused before the
// CLI reads it, with the file, its size and the limit named; one without a size (a pipe) once it
// runs past the limit. A usage error (exit 2), before any connection is made: no Redis is named.
// The CLI runs with a 512 MB heap, so a CLI that read and parsed the file anyway fails here too.
const dir = mkdtempSync(join(tmpdir(), 'cli-job-size-'));
const SIZE = 50 * 1024 * 1024;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A 50 MiB job file that is valid YAML: one long comment. */
function bigYaml(): Buffer {
  const text = Buffer.alloc(SIZE, 'x');
  text.write('# ', 0);
  text.write('\n', SIZE - 1);
  return text;
}

function cli(...args: string[]) {
  const { REDIS_URL: _url, SANDSTREAM_URL: _api, ...rest } = process.env;
  return spawnSync(process.execPath, [join(repoRoot, 'libs/client/dist/cli/main.js'), ...args], {
    env: { ...rest, NODE_OPTIONS: '--max-old-space-size=512' },
    encoding: 'utf8',
    timeout: 120_000,
  });
}

describe('sandstream submit with a job file over the limit', () => {
  it('refuses a 50 MiB file by its size, naming the file, the size and the limit', () => {
    const path = join(dir, 'big.yaml');
    const fd = openSync(path, 'w');
    writeSync(fd, bigYaml());
    closeSync(fd);
    const run = cli('submit', path);
    expect(run.stderr).toContain(
      `${path}: the file is 52,428,800 bytes, over the limit of 33,554,432 for a job file`,
    );
    expect(run.status, run.stderr).toBe(2);
  });

  it('refuses 50 MiB piped to it (/dev/stdin) once it runs past the limit', () => {
    // Through a shell's pipe, as a user would: a pipe has no size to stat.
    const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');
    const { REDIS_URL: _url, SANDSTREAM_URL: _api, ...rest } = process.env;
    const run = spawnSync(
      'sh',
      [
        '-c',
        `{ printf '# '; head -c ${SIZE} /dev/zero | tr '\\0' x; } | "$0" "$1" submit /dev/stdin`,
        process.execPath,
        cliPath,
      ],
      { env: { ...rest, NODE_OPTIONS: '--max-old-space-size=512' }, encoding: 'utf8', timeout: 120_000 },
    );
    expect(run.stderr).toContain(
      '/dev/stdin: the file is more than 33,554,432 bytes, over the limit for a job file',
    );
    expect(run.status, run.stderr).toBe(2);
  });
});
