import { describe, expect, it } from 'vitest';
import { detectBackend } from './detect-backend.js';

const noSocket = () => false;
const socket = (path: string) => path === '/var/run/docker.sock';

describe('detectBackend', () => {
  it('lets SANDBOX_TYPE win over every other signal', () => {
    const d = detectBackend({
      env: { SANDBOX_TYPE: 'inprocess', KUBERNETES_SERVICE_HOST: '10.0.0.1', DOCKER_HOST: 'tcp://x:2375' },
      fileExists: socket,
    });
    expect(d).toEqual({ kind: 'inprocess', reason: 'SANDBOX_TYPE=inprocess is set' });
  });

  it('picks kubernetes inside a pod, before Docker', () => {
    const d = detectBackend({ env: { KUBERNETES_SERVICE_HOST: '10.0.0.1' }, fileExists: socket });
    expect(d.kind).toBe('kubernetes');
    expect(d.reason).toMatch(/KUBERNETES_SERVICE_HOST/);
  });

  it('picks docker from DOCKER_HOST or from the socket', () => {
    expect(detectBackend({ env: { DOCKER_HOST: 'tcp://x:2375' }, fileExists: noSocket })).toMatchObject({
      kind: 'docker',
      reason: 'DOCKER_HOST=tcp://x:2375 is set',
    });
    expect(detectBackend({ env: {}, fileExists: socket })).toMatchObject({
      kind: 'docker',
      reason: 'Docker socket /var/run/docker.sock exists',
    });
    expect(
      detectBackend({
        env: {},
        dockerSocketPath: '/run/user/1000/docker.sock',
        fileExists: (p) => p.includes('1000'),
      }).kind,
    ).toBe('docker');
  });

  it('falls back to in-process and says why', () => {
    const d = detectBackend({
      env: { SANDBOX_TYPE: '', KUBERNETES_SERVICE_HOST: ' ' },
      fileExists: noSocket,
    });
    expect(d.kind).toBe('inprocess');
    expect(d.reason).toMatch(/no SANDBOX_TYPE/);
  });

  it('refuses an unknown SANDBOX_TYPE naming the variable and the choices', () => {
    expect(() => detectBackend({ env: { SANDBOX_TYPE: 'podman' }, fileExists: noSocket })).toThrow(
      /SANDBOX_TYPE must be one of kubernetes, docker, inprocess \(got "podman"\)/,
    );
  });
});
