import { basename } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentCommand, DEFAULT_AGENT_ENTRY } from './inprocess-backend.js';

describe('the agent the in-process backend starts', () => {
  it('is the single executable when it is built (it boots from its snapshot, in about half the CPU)', () => {
    expect(basename(DEFAULT_AGENT_ENTRY)).toBe('sandstream-agent');
  });

  it('runs a JavaScript entry under node and anything else by itself', () => {
    expect(agentCommand('/opt/agent/sandstream-agent', '/usr/bin/node')).toEqual([
      '/opt/agent/sandstream-agent',
    ]);
    for (const entry of ['/a/main.js', '/a/sandstream-agent.cjs', '/a/main.mjs'])
      expect(agentCommand(entry, '/usr/bin/node')).toEqual(['/usr/bin/node', entry]);
  });
});
