import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { testRedisUrl } from '@sandstream/test-support';
import {
  chunkPieces,
  DownloadStepSchema,
  findGnuTar,
  Limits,
  packTree,
  RawListConnection,
  rawOptionsFromUrl,
  sandboxKeys,
  transferKey,
  UploadStepSchema,
} from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testClient, uniqueJobId } from '../testing/agent-harness.js';
import { recordingContext } from './recording-context.js';
import { TransferChannel } from './transfer-channel.js';
import { downloadStep, uploadStep } from './transfer-steps.js';

// Upload and download steps against a real Redis: the tar travels through the transfer list in
// chunks, as the SDK sends and reads it.
let redis: Redis;
const keys = sandboxKeys(uniqueJobId('xfer'), 'tagged');
const channel = new TransferChannel(keys, () => RawListConnection.open(rawOptionsFromUrl(testRedisUrl())));

beforeAll(async () => {
  redis = testClient();
});
afterAll(async () => {
  redis.disconnect();
});

async function sendTree(transfer: string, root: string, name: string): Promise<void> {
  const key = transferKey(keys, transfer);
  for await (const parts of chunkPieces(await packTree(path.join(root, name))))
    await redis.lpush(key, Buffer.concat(parts));
  await redis.lpush(key, Buffer.alloc(0));
}

// Uploads unpack with GNU tar where the sandbox has it (this machine does), else with tar-fs.
const UNPACKERS = [
  { name: 'GNU tar', unpacker: { gnuTar: findGnuTar } },
  { name: 'tar-fs', unpacker: { gnuTar: async () => null } },
];

describe.each(UNPACKERS)('upload and download steps, unpacking with $name', ({ name, unpacker }) => {
  let dir: string;
  beforeAll(async () => {
    dir = await realpath(await mkdtemp(path.join(tmpdir(), 'transfer-steps-')));
    // The machine must have what this variant claims to test.
    if (name === 'GNU tar') expect(await findGnuTar()).toBe('tar');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  /** Transfer ids of their own per variant: the lists live in one shared Redis. */
  const t = (id: string) => `${id}-${name.replace(/\W/g, '')}`;
  it('unpack a tree sent in chunks, and send it back as a tar with the same bytes', async () => {
    const source = path.join(dir, 'src');
    await mkdir(path.join(source, 'tree', 'sub'), { recursive: true });
    const blob = randomBytes(Limits.transferChunkBytes * 2 + 123);
    await writeFile(path.join(source, 'tree', 'sub', 'blob.bin'), blob);
    const r = recordingContext(dir);
    const [outcome] = await Promise.all([
      uploadStep(
        UploadStepSchema.parse({
          schemaVersion: 1,
          stepId: 'u',
          kind: 'upload',
          path: 'dest',
          transfer: t('t1'),
        }),
        r.ctx,
        channel,
        unpacker,
      ),
      sendTree(t('t1'), source, 'tree'),
    ]);
    expect(outcome).toMatchObject({ exitCode: 0, output: { kind: 'upload', files: 1 } });
    // Buffer.equals, not toEqual: a deep comparison walks 2 MiB byte by byte for seconds.
    expect((await readFile(path.join(dir, 'dest', 'tree', 'sub', 'blob.bin'))).equals(blob)).toBe(true);

    const down = recordingContext(dir);
    const sent = await downloadStep(
      DownloadStepSchema.parse({
        schemaVersion: 1,
        stepId: 'd',
        kind: 'download',
        path: 'dest/tree',
        transfer: t('t2'),
      }),
      down.ctx,
      channel,
    );
    expect(sent).toMatchObject({ exitCode: 0, output: { kind: 'download', files: 1 } });
    const chunks: Buffer[] = [];
    for (;;) {
      const popped = await redis.brpopBuffer(transferKey(keys, t('t2')), 5);
      if (!popped || popped[1].length === 0) break;
      expect(popped[1].length).toBeLessThanOrEqual(Limits.transferChunkBytes);
      chunks.push(popped[1]);
    }
    expect(Buffer.concat(chunks).includes(blob.subarray(0, 4096))).toBe(true);
  });

  it('refuses a tree past maxBytes, naming the limit, and leaves the agent working', async () => {
    const source = path.join(dir, 'big');
    await mkdir(path.join(source, 'b'), { recursive: true });
    await writeFile(path.join(source, 'b', 'blob.bin'), randomBytes(3 * 1024 * 1024));
    const r = recordingContext(dir);
    const [outcome] = await Promise.all([
      uploadStep(
        UploadStepSchema.parse({
          schemaVersion: 1,
          stepId: 'u2',
          kind: 'upload',
          path: 'small',
          transfer: t('t3'),
          maxBytes: 1024 * 1024,
        }),
        r.ctx,
        channel,
        unpacker,
      ),
      sendTree(t('t3'), source, 'b'),
    ]);
    expect(outcome).toMatchObject({ errorCode: 'limit_exceeded' });
    expect(outcome.errorMessage).toMatch(/over.*1,048,576/);
    await redis.del(transferKey(keys, t('t3')));
  });

  it('refuses a transfer cut off right after a file header without taking the agent down', async () => {
    // The limit trips while tar-fs is still checking the entry's directory, before it has
    // piped the entry anywhere: the entry stream was destroyed with no 'error' listener of its
    // own, an uncaught exception that killed the whole agent (seen in CI as a lost sandbox). The
    // chunks come from memory here, not Redis, so the limit trips before any file-system callback.
    const source = path.join(dir, 'cut');
    await mkdir(source, { recursive: true });
    await writeFile(path.join(source, 'blob.bin'), randomBytes(64 * 1024));
    const tar: Buffer[] = [];
    for await (const chunk of await packTree(path.join(source, 'blob.bin'))) tar.push(chunk as Buffer);
    const whole = Buffer.concat(tar);
    const inMemory = {
      async *receive() {
        yield whole.subarray(0, 1024); // the file's header and a little of its data
        yield whole.subarray(1024);
      },
    };
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    try {
      const outcome = await uploadStep(
        UploadStepSchema.parse({
          schemaVersion: 1,
          stepId: 'u4',
          kind: 'upload',
          path: 'cut',
          transfer: t('t4'),
          maxBytes: 2048,
        }),
        recordingContext(dir).ctx,
        inMemory,
        unpacker,
      );
      expect(outcome).toMatchObject({ errorCode: 'limit_exceeded' });
      // The destroyed entry's error surfaces a few ticks later, after tar-fs' checks.
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    expect(uncaught).toEqual([]);
  });
});
