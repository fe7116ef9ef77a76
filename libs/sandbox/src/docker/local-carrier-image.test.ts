import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot, runCommand } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_CARRIER_IMAGE, localCarrierImage } from './local-carrier-image.js';

const dir = mkdtempSync(join(tmpdir(), 'carrier-tag-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('localCarrierImage', () => {
  it("reads this checkout's recorded carrier tag, else the old shared one", () => {
    const record = join(dir, 'carrier-image');
    expect(localCarrierImage(pathToFileURL(record))).toBe(DEFAULT_CARRIER_IMAGE);
    writeFileSync(record, 'sandstream/agent-carrier:0123456789ab\n');
    expect(localCarrierImage(pathToFileURL(record))).toBe('sandstream/agent-carrier:0123456789ab');
  });
});

// scripts/images/agent-carrier.sh on stand-in agent files (a FROM scratch image of a few bytes):
// two checkouts with different agents get two tags, neither rebuilds the other's.
const engine = spawnSync('docker', ['info'], { stdio: 'ignore' }).status === 0;
describe.skipIf(!engine)('the carrier image is tagged by the content of the agent files', () => {
  const built: string[] = [];
  afterAll(() => {
    for (const image of built) spawnSync('docker', ['rmi', '-f', image], { stdio: 'ignore' });
  });
  const carrierFor = async (name: string, content: string) => {
    const agentDir = join(dir, name);
    mkdirSync(join(agentDir, 'runtime', 'lib'), { recursive: true });
    writeFileSync(join(agentDir, 'sandstream-agent'), content, { mode: 0o755 });
    writeFileSync(join(agentDir, 'runtime', 'lib', 'ld-linux-x86-64.so.2'), 'loader');
    const record = join(agentDir, 'carrier-image');
    const run = async () => {
      const result = await runCommand('bash', [join(repoRoot, 'scripts/images/agent-carrier.sh')], {
        env: {
          ...process.env,
          AGENT_BINARY: join(agentDir, 'sandstream-agent'),
          IMAGE: '',
          CARRIER_IMAGE_FILE: record,
        },
      });
      expect(result.status, result.stderr).toBe(0);
      return result.stderr;
    };
    await run();
    const image = readFileSync(record, 'utf8').trim();
    built.push(image);
    return { image, run };
  };

  it('gives each set of agent files its own tag, and keeps an image whose files did not change', async () => {
    const one = await carrierFor('one', `agent one ${Date.now()}`);
    const two = await carrierFor('two', `agent two ${Date.now()}`);
    expect(one.image).toMatch(/^sandstream\/agent-carrier:[0-9a-f]{12}$/);
    expect(two.image).toMatch(/^sandstream\/agent-carrier:[0-9a-f]{12}$/);
    expect(one.image).not.toBe(two.image);
    // Both exist side by side on the engine.
    for (const image of [one.image, two.image])
      expect(spawnSync('docker', ['image', 'inspect', image], { stdio: 'ignore' }).status).toBe(0);
    // A second run of the first finds its image as it is (the other checkout did not replace it).
    expect(await one.run()).toMatch(/is up to date/);
  });
});
