import { describe, expect, it } from 'vitest';
import { cpuToNanoCpus, memoryToBytes } from './quantity.js';

describe('quantities', () => {
  it('converts memory with binary and decimal units', () => {
    expect(memoryToBytes('512Mi')).toBe(512 * 1024 * 1024);
    expect(memoryToBytes('1.5Gi')).toBe(1.5 * 1024 ** 3);
    expect(memoryToBytes('1G')).toBe(1e9);
    expect(memoryToBytes('1000')).toBe(1000);
    expect(() => memoryToBytes('lots')).toThrow(/memory quantity "lots"/);
  });

  it('converts cpu cores and millicores to nano-cpus', () => {
    expect(cpuToNanoCpus('500m')).toBe(5e8);
    expect(cpuToNanoCpus('2')).toBe(2e9);
    expect(cpuToNanoCpus('0.25')).toBe(2.5e8);
    expect(() => cpuToNanoCpus('2 cores')).toThrow(/cpu quantity/);
  });
});
