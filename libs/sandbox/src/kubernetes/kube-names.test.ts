import { describe, expect, it } from 'vitest';
import { sandboxPodName, toLabelValue } from './kube-names.js';

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

describe('Kubernetes names for job ids', () => {
  it('gives every job id a DNS-1123 pod name of at most 63 characters, stable and distinct', () => {
    for (const jobId of ['job-1', 'Job:1', 'job:1', 'a'.repeat(128), '0.9_x', 'UPPER']) {
      const name = sandboxPodName(jobId);
      expect(name).toMatch(dns1123Label);
      expect(name.length).toBeLessThanOrEqual(63);
      expect(sandboxPodName(jobId)).toBe(name);
    }
    expect(sandboxPodName('Job:1')).not.toBe(sandboxPodName('job-1'));
    expect(sandboxPodName('job:1')).not.toBe(sandboxPodName('job-1'));
  });

  it('keeps valid label values and hashes the rest into valid ones', () => {
    expect(toLabelValue('suite-tenant')).toBe('suite-tenant');
    for (const value of ['Job:1', 'with spaces', 'x'.repeat(64), ':::']) {
      const label = toLabelValue(value);
      expect(label).toMatch(labelValue);
      expect(label.length).toBeLessThanOrEqual(63);
    }
    expect(toLabelValue('a:b')).not.toBe(toLabelValue('a_b'));
  });
});
