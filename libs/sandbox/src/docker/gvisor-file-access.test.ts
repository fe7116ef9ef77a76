import { describe, expect, it } from 'vitest';
import { sharesRootFiles } from './gvisor-file-access.js';

// runsc's flags as the engine passes them (runtimeArgs) and as its sandbox process shows them.
describe('sharesRootFiles', () => {
  it('is shared only with --file-access=shared, however it is written', () => {
    expect(sharesRootFiles(['--platform=ptrace', '--network=host'])).toBe(false);
    expect(sharesRootFiles(['--platform=ptrace', '--file-access=shared'])).toBe(true);
    expect(sharesRootFiles(['-file-access=shared'])).toBe(true);
    expect(sharesRootFiles(['--file-access', 'shared', '--network=host'])).toBe(true);
    expect(sharesRootFiles(['--file-access=exclusive'])).toBe(false);
    expect(sharesRootFiles(['--file-access=shared', '--file-access=exclusive'])).toBe(false);
    // Mounts other than the root are another flag.
    expect(sharesRootFiles(['--file-access-mounts=shared'])).toBe(false);
  });

  it("is not shared when the root is under the Sentry's own overlay", () => {
    expect(sharesRootFiles(['--file-access=shared', '--overlay2=none'])).toBe(true);
    expect(sharesRootFiles(['--file-access=shared', '--overlay2=root:memory'])).toBe(false);
    expect(sharesRootFiles(['--file-access=shared', '--overlay2', 'root:self'])).toBe(false);
    expect(sharesRootFiles(['--file-access=shared', '--overlay'])).toBe(false);
    expect(sharesRootFiles(['--file-access=shared', '--overlay=false'])).toBe(true);
  });

  it("reads a sandbox process's command line up to its subcommand", () => {
    const line = [
      '--root=/run/x',
      '--file-access=shared',
      '--network=host',
      '--log-fd=3',
      'boot',
      '--bundle=/b',
    ];
    expect(sharesRootFiles(line)).toBe(true);
    expect(sharesRootFiles(['--root=/run/x', 'boot', '--file-access=shared'])).toBe(false);
  });
});
