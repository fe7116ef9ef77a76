import { describe, expect, it } from 'vitest';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { AGENT_LOADER_COMMAND, toolchainContainerOptions } from './container-config.js';
import { demuxDockerLog } from './docker-logs.js';

const base = {
  name: 'sandstream-job-1',
  labels: { a: 'b' },
  sharedVolume: 'shared-1',
  networkMode: 'host',
  agentArgs: ['--job-id', 'job-1'],
  env: { FOO: 'bar' },
};

describe('toolchainContainerOptions', () => {
  it('runs the agent through the loader with least privilege, limits, runtime and user', () => {
    const spec = SandboxSpecSchema.parse({
      image: 'node:20',
      user: '1000:1000',
      runtimeClass: 'gvisor',
      resources: {
        requests: { cpu: '250m', memory: '128Mi' },
        limits: { cpu: '1.5', memory: '1Gi', pids: 300 },
      },
    });
    const o = toolchainContainerOptions({
      ...base,
      spec,
      work: { kind: 'volume', name: 'work-1' },
      runtime: 'runsc',
    });
    expect(o.Entrypoint).toEqual([...AGENT_LOADER_COMMAND, '--job-id', 'job-1']);
    expect(o.Cmd).toEqual([]);
    expect(o.User).toBe('1000:1000');
    expect(o.Env).toEqual(['FOO=bar']);
    expect(o.WorkingDir).toBe('/work');
    expect(o.HostConfig).toMatchObject({
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Runtime: 'runsc',
      NanoCpus: 1.5e9,
      Memory: 1024 ** 3,
      // No swap beyond the memory limit (Docker's own default would double it).
      MemorySwap: 1024 ** 3,
      PidsLimit: 300,
      MemoryReservation: 128 * 1024 ** 2,
      CpuShares: 256,
      NetworkMode: 'host',
      Mounts: [
        { Type: 'volume', Source: 'shared-1', Target: '/shared', ReadOnly: true },
        { Type: 'volume', Source: 'work-1', Target: '/work' },
      ],
    });
  });

  it('mounts a work volume at the working directory and honours a command override', () => {
    const spec = SandboxSpecSchema.parse({ image: 'x', workingDirectory: '/src', command: ['/bin/true'] });
    const o = toolchainContainerOptions({ ...base, spec, work: { kind: 'volume', name: 'work-1' } });
    expect(o.Entrypoint).toEqual(['/bin/true']);
    expect(o.HostConfig?.Mounts?.[1]).toEqual({ Type: 'volume', Source: 'work-1', Target: '/src' });
    expect(o.HostConfig?.Runtime).toBeUndefined();
    expect(o.HostConfig?.Memory).toBeUndefined();
    expect(o.HostConfig?.ReadonlyRootfs).toBeUndefined();
  });

  it("creates the container under the operator's cgroup parent when one is set", () => {
    const spec = SandboxSpecSchema.parse({ image: 'x' });
    const work = { kind: 'volume', name: 'work-1' } as const;
    expect(
      toolchainContainerOptions({ ...base, spec, work, cgroupParent: 'sandstream/sandboxes' }).HostConfig,
    ).toMatchObject({ CgroupParent: 'sandstream/sandboxes' });
    expect(toolchainContainerOptions({ ...base, spec, work }).HostConfig).not.toHaveProperty('CgroupParent');
  });

  it('makes the root read-only with a tmpfs /tmp when the spec asks for it', () => {
    const spec = SandboxSpecSchema.parse({ image: 'x', readOnlyRootFilesystem: true });
    const o = toolchainContainerOptions({ ...base, spec, work: { kind: 'volume', name: 'work-1' } });
    expect(o.HostConfig?.ReadonlyRootfs).toBe(true);
    expect(Object.keys(o.HostConfig?.Tmpfs ?? {})).toEqual(['/tmp']);
  });
});

describe('demuxDockerLog', () => {
  it('joins the payloads of multiplexed stdout/stderr frames', () => {
    const frame = (stream: number, text: string) => {
      const payload = Buffer.from(text);
      const header = Buffer.alloc(8);
      header[0] = stream;
      header.writeUInt32BE(payload.length, 4);
      return Buffer.concat([header, payload]);
    };
    expect(demuxDockerLog(Buffer.concat([frame(1, 'out\n'), frame(2, 'err\n')]))).toBe('out\nerr\n');
    expect(demuxDockerLog(Buffer.from('plain tty output'))).toBe('plain tty output');
  });

  it('caps the layer with StorageOpt only where the engine has a quota, and sizes a /tmp tmpfs to the disk limit', () => {
    const spec = SandboxSpecSchema.parse({
      image: 'node:20',
      readOnlyRootFilesystem: true,
      resources: { limits: { ephemeralStorage: '64Mi' } },
    });
    const work = { kind: 'volume', name: 'work-1' } as const;
    const quota = toolchainContainerOptions({ ...base, spec, work, storageQuota: true });
    expect(quota.HostConfig?.StorageOpt).toEqual({ size: String(64 * 1024 ** 2) });
    expect(quota.HostConfig?.Tmpfs).toEqual({ '/tmp': `rw,nosuid,nodev,mode=1777,size=${64 * 1024 ** 2}` });
    const none = toolchainContainerOptions({ ...base, spec, work, storageQuota: false });
    expect(none.HostConfig?.StorageOpt).toBeUndefined();
  });
});
