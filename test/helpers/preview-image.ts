import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCommand } from '@sandstream/test-support';
import type Docker from 'dockerode';

export const PREVIEW_TEST_IMAGE = 'sandstream/preview-test:node';

/**
 * The default Debian image plus this machine's node (the preview tests' web app needs a server
 * that speaks SSE and WebSocket; the image has neither python nor node). Built once, kept.
 */
export async function buildPreviewImage(docker: Docker): Promise<string> {
  try {
    await docker.getImage(PREVIEW_TEST_IMAGE).inspect();
    return PREVIEW_TEST_IMAGE;
  } catch {
    // not built yet
  }
  const dir = mkdtempSync(join(tmpdir(), 'preview-image-'));
  try {
    copyFileSync(process.execPath, join(dir, 'node'));
    writeFileSync(
      join(dir, 'Dockerfile'),
      'FROM sandstream/debian:bookworm\nCOPY node /usr/local/bin/node\n',
    );
    const built = await runCommand('docker', ['build', '-q', '-t', PREVIEW_TEST_IMAGE, dir]);
    if (built.status !== 0) throw new Error(`docker build ${PREVIEW_TEST_IMAGE}: ${built.stderr}`);
    return PREVIEW_TEST_IMAGE;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
